"""The approval queue: the requests an approver may decide, one card each, and the decision form."""

import json

from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from core.api_errors import DomainError
from governance.roles import describe, unstaffed_approver_roles
from runs import provenance, selectors
from runs.admin.base import WorkbenchAdmin, time_left
from runs.approvals import approval_decide, check_approval_decide
from runs.models import ApprovalRequest, Run
from runs.outbox import delivery_note
from runs.templatetags.workbench import STATUS_TEXT, status_label


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(WorkbenchAdmin):
    """The changelist is the record of every request; the queue (queue/) is where decisions happen."""

    list_display = ["tool", "run_link", "approver_role", "status_text", "approvals", "escalated_from_role",
                    "decided_by", "decided_via", "expires_at", "created_at"]
    list_filter = ["status", "approver_role", "escalated_from_role", ("created_at", admin.DateFieldListFilter)]
    list_select_related = ["run", "approver_role", "decided_by", "escalated_from_role"]
    change_list_template = "admin/runs/approvalrequest/change_list.html"

    def get_queryset(self, request):
        return selectors.approvals_visible_to(request.user)

    @admin.display(description="status", ordering="status")
    def status_text(self, approval):
        return status_label(approval.status)

    @admin.display(description="approvals")
    def approvals(self, approval):
        """'1 of 2' for a quorum; a single approver's request needs no count."""
        return f"{approval.approvals_count} of {approval.quorum}" if approval.quorum > 1 else "-"

    @admin.display(description="run")
    def run_link(self, approval):
        return format_html('<a href="{}">{}</a>', reverse("admin:runs_run_change", args=[approval.run_id]),
                           str(approval.run_id)[:8])

    def get_urls(self):
        return [
            path("queue/", self.admin_site.admin_view(self.queue_view), name="runs_approval_queue"),
            path("<uuid:approval_id>/decide/", self.admin_site.admin_view(self.decide_view), name="runs_approval_decide"),
        ] + super().get_urls()

    def queue_view(self, request):
        if not selectors.workbench_member(request.user):
            return redirect("admin:index")
        for entry in unstaffed_approver_roles():
            messages.warning(request, f"Nobody can decide: {describe(entry)}.")
        now = timezone.now()
        cards = []
        for approval in selectors.approval_queue(request.user).select_related("run__agent_version", "escalate_to_role"):
            try:
                check_approval_decide(approval=approval, user=request.user)
                refusal = ""
            except DomainError as exc:
                refusal = exc.message
            run = approval.run
            cards.append({
                "approval": approval, "run": run, "refusal": refusal, "time_left": time_left(approval.expires_at, now),
                "arguments": json.dumps(approval.arguments, indent=2, sort_keys=True, ensure_ascii=False),
                "tainted": bool(run.state.get("tainted")) or run.tainted,
                "taint_reasons": run.state.get("taint_reasons", []) or [r for r in run.taint_reason.splitlines() if r],
                "provenance": provenance.of_approval(approval),
                # "1 of 2 approvals, by X": who the quorum counted so far, and who approved before an
                # escalation (on record, no longer counted).
                **_quorum_lines(approval),
                # What happens to this call if a worker dies during it (runs.outbox): sent again under its
                # key, or never sent again and the run ends "unknown outcome".
                "delivery": delivery_note(approval.tool)
                if run.snapshot.get("tools", {}).get(approval.tool, {}).get("side_effect") else "",
            })
        # Requests the user decided, their approvals short of a quorum included.
        recent = (ApprovalRequest.objects.filter(Q(decided_by=request.user) | Q(decisions__user=request.user))
                  .distinct().select_related("run", "approver_role").order_by("-created_at")[:10])
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": "Approval queue",
            "cards": cards, "counts": selectors.pending_counts_by_role(request.user), "recent": recent,
            "status_label": status_label,
        }
        return TemplateResponse(request, "admin/runs/approval_queue.html", context)

    def decide_view(self, request, approval_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        queue = reverse("admin:runs_approval_queue")
        decision, reason = request.POST.get("decision"), request.POST.get("reason", "").strip()
        if decision not in ("approve", "deny"):
            messages.error(request, "Choose Approve or Deny.")
            return redirect(queue)
        if not selectors.approvals_visible_to(request.user).filter(id=approval_id).exists():
            messages.error(request, "Nothing was decided: this request is not in a queue of yours.")
            return redirect(queue)
        try:
            approval = approval_decide(approval_id=approval_id, user=request.user, approve=decision == "approve",
                                       reason=reason, via="session")
        except DomainError as exc:  # a denial without a reason, a decision by the run's caller, a second decision
            messages.error(request, f"Nothing was decided: {exc.message}.")
            return redirect(f"{queue}#approval-{approval_id}")
        run = Run.objects.get(pk=approval.run_id)
        verb = "Approved" if decision == "approve" else "Denied"
        if approval.status == ApprovalRequest.Status.PENDING:  # an approval short of the quorum
            messages.success(request, f"Your approval of {approval.tool} is recorded: {approval.approvals_count} of "
                                      f"{approval.quorum}. It runs when another member of {approval.approver_role.name} "
                                      "approves too.")
            return redirect(queue)
        messages.success(request, format_html(
            '{} {} for run <a href="{}">{}</a>. The run is now: {}.', verb, approval.tool,
            reverse("admin:runs_run_change", args=[run.pk]), str(run.pk)[:8], STATUS_TEXT.get(run.status, run.status)))
        return redirect(queue)


def _quorum_lines(approval: ApprovalRequest) -> dict:
    decisions = list(approval.decisions.all())
    counted = [d.username for d in decisions if d.decision == "approved" and d.role == approval.approver_role.name]
    before = [f"{d.username} ({d.role})" for d in decisions if d.role != approval.approver_role.name]
    return {"approved_by": counted, "before_escalation": before}
