"""Standing approvals in the workbench: the list of your roles' (compliance sees all), and revoking.

Granting one is an API call (POST /api/v1/standing-approvals/): it takes a pattern of arguments
written as JSON, which a reviewer should read as sent. Revoking is an action here, through the
same service as the API's revoke, so the same people may do it.
"""

import json

from django.contrib import admin, messages
from django.utils import timezone

from core.api_errors import DomainError
from runs import standing
from runs.admin.base import AgentFilter, WorkbenchAdmin, time_left
from runs.models import StandingApproval


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("expired", "expired"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True, expires_at__gt=now)
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(StandingApproval)
class StandingApprovalAdmin(WorkbenchAdmin):
    list_display = ["tool", "agent_text", "pattern", "role", "granted_by", "state_text", "expires_text", "uses",
                    "created_at"]
    list_filter = [StateFilter, "role", AgentFilter, "tool"]
    list_select_related = ["agent", "role", "granted_by", "revoked_by"]
    search_fields = ["tool", "reason", "id"]
    readonly_fields = ["id", "tool", "agent", "pattern", "role", "reason", "granted_by", "granted_via", "created_at",
                       "expires_at", "state_text", "revoked_at", "revoked_by", "revoke_reason", "uses"]
    fields = readonly_fields
    actions = ["revoke_selected"]

    def get_queryset(self, request):
        return standing.standing_visible_to(request.user)

    def get_actions(self, request):
        # The read-only base has no delete action; revoking is this page's one action.
        return {name: value for name, value in super().get_actions(request).items() if name == "revoke_selected"}

    @admin.display(description="agent")
    def agent_text(self, obj: StandingApproval) -> str:
        return obj.agent.slug if obj.agent else "every agent"

    @admin.display(description="arguments")
    def pattern(self, obj: StandingApproval) -> str:
        return json.dumps(obj.arguments, sort_keys=True, ensure_ascii=False)

    @admin.display(description="state")
    def state_text(self, obj: StandingApproval) -> str:
        return standing.standing_state(obj)

    @admin.display(description="expires", ordering="expires_at")
    def expires_text(self, obj: StandingApproval) -> str:
        return "revoked" if obj.revoked_at else time_left(obj.expires_at)

    @admin.action(description="Revoke the selected standing approvals")
    def revoke_selected(self, request, queryset):
        done, refused = 0, []
        for standing_id in queryset.values_list("id", flat=True):
            try:
                standing.standing_revoke(standing_id=standing_id, user=request.user, reason="revoked in the workbench")
                done += 1
            except DomainError as exc:
                refused.append(f"{str(standing_id)[:8]}: {exc.message}")
        if done:
            messages.success(request, f"Revoked {done} standing approval(s); the next call each would answer asks "
                                      "people.")
        for line in refused:
            messages.error(request, line)
