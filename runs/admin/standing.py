"""Standing approvals in the workbench: the list of your roles' (compliance sees all), granting one
and revoking. Both go through runs.standing, the API's services, so the same rules and the same
people apply; the argument pattern is written as JSON, as the API takes it.
"""

import json
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone

from agents.models import Agent, Tool
from core.admin import BoundedJSONFormField
from core.api_errors import DomainError
from runs import selectors, standing
from runs.admin.base import AgentFilter, WorkbenchAdmin, time_left
from runs.models import StandingApproval


class GrantForm(forms.Form):
    tool = forms.ModelChoiceField(queryset=Tool.objects.order_by("name"), to_field_name="name")
    agent = forms.ModelChoiceField(queryset=Agent.objects.order_by("slug"), to_field_name="slug", required=False,
                                   empty_label="Every agent")
    role = forms.ModelChoiceField(queryset=Group.objects.none(), to_field_name="name",
                                  help_text="Your role that a tool-approval policy asks about the tool.")
    arguments = BoundedJSONFormField(
        help_text='Per argument, {"equals": value} or {"in": [value, ...]}; every argument of a call must be named, '
                  "and values are compared exactly.",
        widget=forms.Textarea(attrs={"rows": 6}))
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    days = forms.IntegerField(min_value=1, max_value=standing.MAX_PERIOD.days, initial=7, label="Days it lasts")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["role"].queryset = user.groups.order_by("name")


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

    change_list_template = "admin/runs/standingapproval/change_list.html"

    def get_queryset(self, request):
        return standing.standing_visible_to(request.user)

    def get_urls(self):
        return [path("grant/", self.admin_site.admin_view(self.grant_view), name="runs_standing_grant")] + super().get_urls()

    def grant_view(self, request):
        if not selectors.workbench_member(request.user):
            return redirect("admin:index")
        form = GrantForm(request.POST if request.method == "POST" else None, user=request.user)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            try:
                granted = standing.standing_grant(
                    user=request.user, tool=data["tool"].name, agent=data["agent"].slug if data["agent"] else None,
                    arguments=data["arguments"], role=data["role"].name, reason=data["reason"], via="session",
                    expires_at=timezone.now() + timedelta(days=data["days"]))
            except DomainError as exc:
                form.add_error(None, exc.message)
                for field, problems in exc.details.items():
                    form.add_error(None, f"{field}: {json.dumps(problems, ensure_ascii=False)}")
            else:
                messages.success(request, f"Granted standing approval {str(granted.pk)[:8]} of {granted.tool}.")
                return redirect("admin:runs_standingapproval_changelist")
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": "Grant a standing approval",
                   "form": form}
        return TemplateResponse(request, "admin/runs/standingapproval/grant.html", context)

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
