"""Golden cases are made in the workbench; an existing case is read-only there: its edit, deletion
or recording is a proposal (evals.proposals: the actions below, or the API), approved, refused or
withdrawn on the proposals' page. Eval runs and their results are read there."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from core.admin import ReadOnlyAdmin
from core.permissions import is_governance_admin
from core.api_errors import DomainError
from evals import proposals
from evals.cases import case_changed
from evals.models import EvalResult, EvalRun, GoldenCase, GoldenCaseProposal, GoldenCaseVersion
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
    actions = ["run_golden_sets", "record_cases", "propose_deletion"]

    def get_readonly_fields(self, request, obj=None):
        # A change of a case in force is a proposal (PATCH evals/cases/{id}/), never a save of this form.
        if obj is not None:
            return [f for _, opts in self.fieldsets for f in opts["fields"]]
        return self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False  # the action "Propose the deletion" instead

    @admin.display(description="Recorded calls")
    def recorded_calls(self, case):
        if not case.recordings:
            return "none: every read-only call goes to the live tool (use the action Record)"
        return format_html_join(mark_safe("<br>"), "{} {}", ((r["tool"], r["arguments"]) for r in case.recordings))

    def save_model(self, request, obj, form, change):
        if change:  # the form is read-only then; a crafted POST does not save either
            raise PermissionDenied("a golden case in force is changed by a proposal")
        super().save_model(request, obj, form, change)
        case_changed(obj, None, user=request.user)

    def _propose(self, request, queryset, propose, done: str):
        if not is_governance_admin(request.user):
            self.message_user(request, "Only governance admins may propose changes of golden cases.", messages.ERROR)
            return
        for case in queryset.select_related("agent"):
            try:
                proposal = propose(case)
            except DomainError as exc:
                self.message_user(request, f"{case}: nothing proposed: {exc.message}", messages.ERROR)
                continue
            self.message_user(request, f"{case}: {done} proposed (proposal {proposal.pk}); nothing changes until "
                                       "another governance admin approves it.", messages.SUCCESS)

    @admin.action(description="Record the selected cases against the live data (a proposal)")
    def record_cases(self, request, queryset):
        self._propose(request, queryset, lambda case: proposals.propose_record(
            case, user=request.user, via="the workbench"), "a recording")

    @admin.action(description="Propose the deletion of the selected cases")
    def propose_deletion(self, request, queryset):
        self._propose(request, queryset, lambda case: proposals.propose(
            case, GoldenCaseProposal.Kind.DELETE, user=request.user), "the deletion")

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


@admin.register(GoldenCaseProposal)
class GoldenCaseProposalAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "kind", "base_version", "proposed_by", "created_at", "status",
                    "decided_by"]
    list_filter = ["status", "kind", "agent_slug"]
    actions = ["approve", "refuse", "withdraw"]

    def has_view_permission(self, request, obj=None):
        # Governance admins decide them (by their role, as evals.proposals checks), whatever their model permissions.
        return is_governance_admin(request.user) or super().has_view_permission(request, obj)

    def has_module_permission(self, request):
        return self.has_view_permission(request) or super().has_module_permission(request)

    def _decide(self, request, queryset, verb: str):
        for proposal in queryset:
            try:
                getattr(proposals, verb)(proposal, user=request.user)
            except DomainError as exc:
                self.message_user(request, f"{proposal}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"{proposal.kind} of {proposal.case_name}: {verb} done.", messages.SUCCESS)

    @admin.action(description="Approve the selected proposals (a governance admin who did not propose them)")
    def approve(self, request, queryset):
        self._decide(request, queryset, "approve")

    @admin.action(description="Refuse the selected proposals")
    def refuse(self, request, queryset):
        self._decide(request, queryset, "refuse")

    @admin.action(description="Withdraw the selected proposals (their proposer)")
    def withdraw(self, request, queryset):
        self._decide(request, queryset, "withdraw")


@admin.register(GoldenCaseVersion)
class GoldenCaseVersionAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "version", "action", "note", "changed_by", "proposed_by", "changed_at"]
    list_filter = ["action", "agent_slug"]


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdmin):
    list_display = ["case_name", "agent_slug", "passed", "status", "eval_run"]
    list_filter = ["passed", "agent_slug"]
