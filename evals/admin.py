"""Golden cases are edited and recorded in the workbench (each change a version, evals.cases);
eval runs and their results are read there."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from core.admin import ReadOnlyAdmin
from core.permissions import is_governance_admin
from evals.cases import case_changed, case_delete, case_values, record_cases
from evals.models import EvalResult, EvalRun, GoldenCase, GoldenCaseVersion
from evals.permissions import may_run_evals
from evals.runner import run_evals


class GoldenCaseVersionInline(admin.TabularInline):
    model = GoldenCaseVersion
    fields = ["version", "action", "note", "changed_by", "changed_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "Versions"

    def has_add_permission(self, request, obj=None):
        return False


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
        ("What the read-only tools answer", {"fields": ["version", "recorded_at", "recorded_by", "recorded_calls"]}),
    ]
    readonly_fields = ["version", "recorded_at", "recorded_by", "recorded_calls"]
    inlines = [GoldenCaseVersionInline]
    actions = ["run_golden_sets", "record_cases"]

    @admin.display(description="Recorded calls")
    def recorded_calls(self, case):
        if not case.recordings:
            return "none: every read-only call goes to the live tool (use the action Record)"
        return format_html_join(mark_safe("<br>"), "{} {}", ((r["tool"], r["arguments"]) for r in case.recordings))

    def save_model(self, request, obj, form, change):
        before = case_values(GoldenCase.objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        case_changed(obj, before, user=request.user)

    def delete_model(self, request, obj):
        case_delete(obj, user=request.user)

    def delete_queryset(self, request, queryset):
        for case in queryset.select_related("agent"):
            case_delete(case, user=request.user)

    @admin.action(description="Record the selected cases against the live data")
    def record_cases(self, request, queryset):
        if not is_governance_admin(request.user):
            self.message_user(request, "Only governance admins may record golden cases.", messages.ERROR)
            return
        for case, refused in record_cases(list(queryset.select_related("agent")), user=request.user,
                                          via="the workbench"):
            if refused is None:
                self.message_user(request, f"{case}: {len(case.recordings)} call(s) recorded, version {case.version}.",
                                  messages.SUCCESS)
            else:
                self.message_user(request, f"{case}: not recorded: {refused}", messages.ERROR)

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


@admin.register(GoldenCaseVersion)
class GoldenCaseVersionAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "version", "action", "note", "changed_by", "changed_at"]
    list_filter = ["action", "agent_slug"]


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "passed", "status", "eval_run"]
    list_filter = ["passed", "agent_slug"]
