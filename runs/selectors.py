"""Reads of runs, approvals and receipts, scoped to what the user may see."""

from django.conf import settings
from django.db.models import Q, QuerySet

from governance.models import Policy
from core.permissions import reads_everything
from runs.models import ApprovalRequest, Receipt, Run


def runs_visible_to(user) -> QuerySet[Run]:
    queryset = Run.objects.select_related("agent", "agent_version", "caller", "receipt")
    return queryset if reads_everything(user) else queryset.filter(caller=user)


def approvals_visible_to(user) -> QuerySet[ApprovalRequest]:
    """Requests for the user's roles, and those escalated away from them (the first role sees what
    became of a request it lost, but no longer decides it)."""
    queryset = ApprovalRequest.objects.select_related(
        "run", "run__agent", "run__caller", "approver_role", "decided_by", "escalated_from_role",
    ).prefetch_related("decisions")
    if reads_everything(user):
        return queryset
    roles = user.groups.all()
    return queryset.filter(Q(approver_role__in=roles) | Q(escalated_from_role__in=roles))


def receipts_visible_to(user) -> QuerySet[Receipt]:
    queryset = Receipt.objects.select_related("run")
    return queryset if reads_everything(user) else queryset.filter(run__caller=user)


def pending_approval(run: Run) -> ApprovalRequest | None:
    if run.status not in ("awaiting_approval", "awaiting_budget"):  # a budget extension is asked the same way
        return None
    return (run.approvals.filter(status="pending").select_related("approver_role", "escalated_from_role")
            .prefetch_related("decisions").order_by("-created_at").first())


# --- the admin workbench ------------------------------------------------------------------


def workbench_member(user) -> bool:
    """Staff with a role (or a superuser): someone the admin workbench has something to show."""
    return bool(user.is_active and user.is_staff and (user.is_superuser or user.groups.exists()))


def approval_queue(user) -> QuerySet[ApprovalRequest]:
    """Pending requests in the user's roles' queues (compliance sees all), oldest first: a request
    that escalated is in its new role's queue only."""
    queryset = approvals_visible_to(user).filter(status=ApprovalRequest.Status.PENDING)
    if not reads_everything(user):
        queryset = queryset.filter(approver_role__in=user.groups.all())
    return queryset.order_by("created_at", "id")


def pending_counts_by_role(user) -> list[tuple[str, int]]:
    """(role, pending requests) for each role whose queue the user sees; the user's approver roles always listed."""
    approver_roles = set(Policy.objects.filter(approver_role__isnull=False).values_list("approver_role__name", flat=True))
    approver_roles |= set(Policy.objects.filter(escalate_to_role__isnull=False)
                          .values_list("escalate_to_role__name", flat=True))
    approver_roles.add(settings.WARRANT.get("TAINT_APPROVER_ROLE", ""))
    counts: dict[str, int] = {name: 0 for name in user.groups.filter(name__in=approver_roles).values_list("name", flat=True)}
    for name in approval_queue(user).values_list("approver_role__name", flat=True):
        counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items())


def runs_visible_in_admin(user) -> QuerySet[Run]:
    """Runs the user reads, plus runs waiting on (or decided by) one of the user's approver roles:
    an approver decides with the run's whole trace in view."""
    if reads_everything(user):
        return runs_visible_to(user)
    return Run.objects.select_related("agent", "agent_version", "caller", "receipt").filter(
        Q(caller=user) | Q(approvals__approver_role__in=user.groups.all())
        | Q(approvals__escalated_from_role__in=user.groups.all())
    ).distinct()
