"""Policy drafts in the workbench: each draft with its last gate side by side (every case before and
after the change, those that changed first), the gated activation as an action, and the emergency
path on the draft's page: one governance admin asks with a stated reason, another confirms it
(recorded on the draft, the history and the policy)."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from core.api_errors import DomainError
from core.permissions import is_governance_admin, reads_everything
from governance import drafts
from governance.models import PolicyDraft


class DraftForm(forms.ModelForm):
    emergency_reason_given = forms.CharField(
        label="Emergency activation: reason", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Only to ask for this draft in force WITHOUT a passing golden set. State why it cannot wait "
                  f"(at least {drafts.MIN_REASON_CHARS} characters); another governance admin must confirm it. It "
                  "is recorded on the draft, in the policy's history, and in the receipt of every run the policy "
                  "governs until a gated change replaces it.")
    emergency_confirm = forms.BooleanField(
        label="Emergency activation: confirm", required=False,
        help_text="Put this draft in force WITHOUT a passing golden set, for the reason another governance admin "
                  "asked it with. Not for the one who asked, nor the draft's author.")

    class Meta:
        model = PolicyDraft
        fields = []


def _side(side: dict) -> str:
    mark = "pass" if side["passed"] else "FAIL"
    parked = f" (parked on {side['awaiting_tool']})" if side.get("awaiting_tool") else ""
    failures = "; ".join(f"{f['expectation']}: expected {f['expected']!r}" for f in side.get("failures", []))
    # A read no recording answered went to the live data: said, since the verdict may change with it.
    unrecorded = "; ".join(side.get("unrecorded", []))
    return format_html("<b>{}</b> {}{}<br>tools: {}<br>policies: {}<br><small>{}</small>{}{}", mark, side["status"],
                       parked, ", ".join(side["tools_called"]) or "none", ", ".join(side["policies_fired"]) or "none",
                       side["output"], format_html("<br><em>{}</em>", failures) if failures else "",
                       format_html("<br>unrecorded calls, answered live: {}", unrecorded) if unrecorded else "")


@admin.register(PolicyDraft)
class PolicyDraftAdmin(admin.ModelAdmin):
    form = DraftForm
    list_display = ["id", "policy_name", "action", "state", "gate_summary", "created_by", "created_at", "activated_by"]
    list_filter = ["state", "action"]
    search_fields = ["policy_name"]
    actions = ["activate_through_gate"]
    readonly_fields = ["policy", "policy_name", "action", "base_version", "state", "values", "gate_eval_run_id",
                       "gate_side_by_side", "created_by", "created_at", "activated_by", "activated_at",
                       "emergency_reason", "emergency_requested_by", "emergency_requested_at"]
    fields = [*readonly_fields, "emergency_reason_given", "emergency_confirm"]

    def has_view_permission(self, request, obj=None):
        return is_governance_admin(request.user) or reads_everything(request.user)

    def has_change_permission(self, request, obj=None):
        return is_governance_admin(request.user)

    def has_add_permission(self, request):
        return False  # drafts are proposed from the policy API (and activated here)

    def has_delete_permission(self, request, obj=None):
        return False  # the record of what was proposed and refused stays

    @admin.display(description="gate")
    def gate_summary(self, draft):
        report = draft.gate_report or {}
        if "total" not in report:
            return "not run"
        return f"{report['passed']}/{report['total']} pass; broken: {', '.join(report.get('broken', [])) or 'none'}"

    @admin.display(description="the last gate, before and after")
    def gate_side_by_side(self, draft):
        report = draft.gate_report or {}
        if not report.get("cases"):
            return report.get("error", "The gate has not run, or the agents it governs have no golden cases.")
        rows = sorted(report["cases"], key=lambda row: not row["changed"])
        return format_html(
            "<p>{}/{} pass at threshold {}; changed: {}</p><table><tr><th>case</th><th>before</th><th>after</th></tr>{}"
            "</table>", report["passed"], report["total"], report["threshold"], ", ".join(report["changed"]) or "none",
            format_html_join("", "<tr><td>{}{}</td><td>{}</td><td>{}</td></tr>", (
                (f"{row['agent']}/{row['name']}", " (changed)" if row["changed"] else "", _side(row["before"]),
                 _side(row["after"])) for row in rows)))

    @admin.action(description="Activate the selected drafts (each only if its golden sets pass)")
    def activate_through_gate(self, request, queryset):
        for draft in queryset:
            try:
                drafts.draft_activate(draft=draft, user=request.user)
                self.message_user(request, f"draft {draft.pk} ({draft.policy_name}) is in force", messages.SUCCESS)
            except DomainError as exc:
                self.message_user(request, f"draft {draft.pk} ({draft.policy_name}): {exc.message}", messages.ERROR)

    def save_model(self, request, obj, form, change):
        reason = form.cleaned_data.get("emergency_reason_given", "").strip()
        try:
            if reason:
                drafts.draft_request_emergency(draft=obj, reason=reason, user=request.user)
                self.message_user(request, f"draft {obj.pk}: the emergency activation is asked for; another "
                                           "governance admin must confirm it", messages.WARNING)
            elif form.cleaned_data.get("emergency_confirm"):
                drafts.draft_confirm_emergency(draft=obj, user=request.user)
                self.message_user(request, f"draft {obj.pk} is in force in an emergency; the reason and who asked "
                                           "and confirmed it are recorded", messages.WARNING)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
