"""What every workbench page of runs shares: who may see it, the list filters, time left."""

from django.contrib import admin
from django.utils import timezone

from agents.models import Agent
from core.admin import ReadOnlyAdmin
from runs import outcome_refusals, selectors
from runs.templatetags.workbench import STATUS_TEXT


def time_left(expires_at, now=None) -> str:
    seconds = int((expires_at - (now or timezone.now())).total_seconds())
    if seconds <= 0:
        return "expired"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [f"{days} d"] if days else []
    if hours or days:
        parts.append(f"{hours} h")
    if not days:
        parts.append(f"{minutes} min")
    return " ".join(parts) + " left"


class WorkbenchAdmin(ReadOnlyAdmin):
    """Visible to staff with a role; what each sees is narrowed in get_queryset by the selectors."""

    def has_module_permission(self, request):
        return selectors.workbench_member(request.user)

    def has_view_permission(self, request, obj=None):
        return selectors.workbench_member(request.user)


class AgentFilter(admin.SimpleListFilter):
    """By agent slug, shown even when there is only one agent (the filter bar stays predictable)."""

    title = "agent"
    parameter_name = "agent"
    field = "agent__slug"

    def lookups(self, request, model_admin):
        return [(slug, slug) for slug in Agent.objects.order_by("slug").values_list("slug", flat=True)]

    def has_output(self):
        return True

    def queryset(self, request, queryset):
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class RunStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"
    field = "status"
    statuses = ("queued", "running", "awaiting_approval", "awaiting_budget", "succeeded", "failed", "blocked", "stopped",
                "cancelled")

    def lookups(self, request, model_admin):
        return [(s, STATUS_TEXT[s]) for s in self.statuses]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class RefusedFilter(admin.SimpleListFilter):
    """Runs that were refused an action, of any kind or of one, and runs that were refused nothing."""

    title = "refused actions"
    parameter_name = "refused"
    prefix = ""  # "run__" on a list of receipts

    def lookups(self, request, model_admin):
        return [("yes", "Any refused"), ("no", "None refused")] + [(k, k.replace("_", " ")) for k in outcome_refusals.KINDS]

    def queryset(self, request, queryset):
        value, count = self.value(), f"{self.prefix}refused_count"
        if value == "yes":
            return queryset.filter(**{f"{count}__gt": 0})
        if value == "no":
            return queryset.filter(**{count: 0})
        if value in outcome_refusals.KINDS:
            return outcome_refusals.filter_refused_kind(queryset, "", value, prefix=self.prefix)
        return queryset
