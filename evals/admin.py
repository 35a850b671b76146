"""Golden cases are edited in the workbench; eval runs and their results are read there."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from evals.models import EvalResult, EvalRun, GoldenCase
from evals.permissions import may_run_evals
from evals.runner import run_evals


@admin.register(GoldenCase)
class GoldenCaseAdmin(admin.ModelAdmin):
    list_display = ["name", "agent", "expected_status", "awaiting_tool", "decision", "enabled", "updated_at"]
    list_filter = ["agent", "expected_status", "enabled"]
    search_fields = ["name", "input", "description"]
    fieldsets = [
        (None, {"fields": ["agent", "name", "description", "enabled"]}),
        ("The request", {"fields": ["input", "roles", "decision"]}),
        ("What must happen", {"fields": ["expected_status", "awaiting_tool", "stop_reason", "error", "tools_called",
                                         "tools_not_called", "output_contains", "output_excludes", "policies_fired"]}),
    ]
    actions = ["run_golden_sets"]

    @admin.action(description="Run the golden set of the selected cases' agents")
    def run_golden_sets(self, request, queryset):
        if not may_run_evals(request.user):
            self.message_user(request, "Only governance admins and compliance may run evals.", messages.ERROR)
            return
        for slug in sorted(set(queryset.values_list("agent__slug", flat=True))):
            eval_run = run_evals(agent_slug=slug, threshold=1.0, user=request.user)
            link = reverse("admin:evals_evalrun_change", args=[eval_run.pk])
            self.message_user(request, format_html(
                '{}: <a href="{}">{} of {} cases passed</a> ({}).', slug, link, eval_run.passed, eval_run.total,
                eval_run.status), messages.SUCCESS if eval_run.status == EvalRun.Status.PASSED else messages.WARNING)


class EvalResultInline(admin.TabularInline):
    model = EvalResult
    fields = ["case_name", "agent_slug", "passed", "status", "failures", "duration_ms"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(EvalRun)
class EvalRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "agent", "status", "passed", "total", "pass_rate", "threshold", "started_by", "created_at"]
    list_filter = ["status", "agent"]
    inlines = [EvalResultInline]


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "passed", "status", "eval_run"]
    list_filter = ["passed", "agent_slug"]
