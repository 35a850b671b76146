"""Reads of runs, approvals and receipts, scoped to what the user may see."""

from django.db.models import QuerySet

from governance.permissions import reads_everything
from runs.models import ApprovalRequest, Receipt, Run


def runs_visible_to(user) -> QuerySet[Run]:
    queryset = Run.objects.select_related("agent", "agent_version", "caller", "receipt")
    return queryset if reads_everything(user) else queryset.filter(caller=user)


def approvals_visible_to(user) -> QuerySet[ApprovalRequest]:
    queryset = ApprovalRequest.objects.select_related("run", "run__agent", "run__caller", "approver_role", "decided_by")
    if reads_everything(user):
        return queryset
    return queryset.filter(approver_role__in=user.groups.all())


def receipts_visible_to(user) -> QuerySet[Receipt]:
    queryset = Receipt.objects.select_related("run")
    return queryset if reads_everything(user) else queryset.filter(run__caller=user)


def pending_approval(run: Run) -> ApprovalRequest | None:
    if run.status != "awaiting_approval":
        return None
    return run.approvals.filter(status="pending").select_related("approver_role").order_by("-created_at").first()
