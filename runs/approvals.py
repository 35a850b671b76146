"""Decisions on approval requests, and their expiry: who may decide, and what a decision does.

A decision closes the request and, if its run waits for it, puts the run back on the queue
(runs.lifecycle.run_requeue); an expired request counts as denied. Both lock the run, then the
request: the order every writer of both follows.
"""

from django.db import transaction
from django.db.models import Subquery
from django.db.models.fields.json import KT
from django.utils import timezone

from core.access import access_of
from core.api_errors import Conflict, DomainError, Forbidden, NotFound
from governance.roles import account_set_up_by
from runs import notify
from runs.lifecycle import run_note, run_requeue
from runs.models import ApprovalRequest, Run, RunEvent
from runs.states import RunStatus

DENIAL_NEEDS_A_REASON = "A denial needs a reason, so the requester knows why."
EXPIRED_REASON = "expired before a decision; counts as denied"


class InvalidDecision(DomainError):
    code = "invalid"


def _callers_recorded(run: Run) -> set[str]:
    """Who started the run as its snapshot and its first event (append-only, sealed into the
    receipt's trace) name them: a caller_id rewritten in the database does not make the caller
    a stranger to their own run."""
    if hasattr(run, "snapshot_caller"):  # read with the run by _lock_approval
        names = {run.snapshot_caller}
    else:
        names = {(run.snapshot or {}).get("caller", {}).get("username")}
    data = RunEvent.objects.filter(run_id=run.pk, kind="run_created").values_list("data", flat=True).first()
    if isinstance(data, dict) and isinstance(data.get("caller"), dict):
        names.add(data["caller"].get("username"))
    if isinstance(data, dict) and isinstance(data.get("origin"), dict):
        # A triggered run was asked what its trigger's author wrote: they may not approve it either (triggers/).
        names.update(data["origin"].get("set_up_by") or ())
    return {name for name in names if isinstance(name, str) and name}


def check_approval_decide(*, approval: ApprovalRequest, user) -> None:
    """Raise unless `user` may decide `approval` now. Separation of duties binds superusers too."""
    # The user's roles as of now, kept under the governance stamp (memberships are stamped).
    if approval.approver_role.name not in access_of(user).roles:
        raise Forbidden(f"only members of {approval.approver_role.name!r} may decide this request")
    if approval.run.caller_id == user.pk or user.get_username() in _callers_recorded(approval.run):
        raise Forbidden("no one approves their own run")
    if account_set_up_by(user=user, by_user_id=approval.run.caller_id):
        raise Forbidden("the run's caller created your account or changed your roles: someone else must decide")
    if approval.status != ApprovalRequest.Status.PENDING:
        raise Conflict(f"this request was already decided: {approval.status}", details={"status": approval.status})


def _lock_approval(approval_id) -> tuple[Run, ApprovalRequest] | None:
    """Lock the run, then its approval request."""
    # A decision needs neither the run's frozen snapshot nor its state, only the caller the
    # snapshot names: read with the run, in the statement that locks it.
    run = (Run.objects.select_for_update().defer("snapshot", "state")
           .filter(id=Subquery(ApprovalRequest.objects.filter(id=approval_id).values("run_id")[:1]))
           .annotate(snapshot_caller=KT("snapshot__caller__username")).first())
    if run is None:
        return None
    approval = ApprovalRequest.objects.select_for_update().select_related("approver_role").get(id=approval_id)
    approval.run = run
    return run, approval


def approval_decide(*, approval_id, user, approve: bool, reason: str = "", via: str) -> ApprovalRequest:
    """`via`: how `user` authenticated ('session', or 'token:' and the token's public id),
    recorded on the decision and in its event."""
    with transaction.atomic():
        locked = _lock_approval(approval_id)
        if locked is None:
            raise NotFound("no such approval request")
        run, approval = locked
        check_approval_decide(approval=approval, user=user)
        now = timezone.now()
        expired = approval.expires_at <= now
        if not expired and not approve and not reason.strip():
            # Every way of deciding (the API, the workbench) holds a denial to this; asked only
            # of a decision that could be taken, so no one writes a reason to learn it cannot.
            raise InvalidDecision(DENIAL_NEEDS_A_REASON[0].lower() + DENIAL_NEEDS_A_REASON[1:-1],
                                  details={"reason": [DENIAL_NEEDS_A_REASON]})
        if expired:
            # Close it as expired (committed), and tell the approver their decision came too late.
            _approval_close(run, approval, ApprovalRequest.Status.EXPIRED, now=now, user=None, reason=EXPIRED_REASON)
        else:
            status = ApprovalRequest.Status.APPROVED if approve else ApprovalRequest.Status.DENIED
            _approval_close(run, approval, status, now=now, user=user, reason=reason, via=via)
    if expired:
        raise Conflict("this request expired before a decision; it counts as denied", details={"status": "expired"})
    return approval


def _approval_close(run: Run, approval: ApprovalRequest, status: str, *, now, user, reason: str, via: str = "") -> None:
    approval.status, approval.decided_by, approval.decided_at, approval.reason = status, user, now, reason
    approval.decided_via = via
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason", "decided_via"])
    decided = (run.step, "approval_decided", {
        "approval_id": str(approval.id), "tool": approval.tool, "decision": status,
        "decided_by": user.get_username() if user else None, "reason": reason, "decided_via": via or None})
    if run.status in (RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_BUDGET):  # a budget ask resumes it too
        # Time spent waiting for a human does not count against the run's own deadline.
        waited = now - approval.created_at
        run_requeue(run, decided=decided, deadline_at=(run.deadline_at + waited) if run.deadline_at else None)
    else:
        run_note(run, decided)
    notify.approval_decided(approval)  # the caller is told, after commit


def approval_expire_due() -> int:
    """Close every pending request past its deadline as expired, and resume its run. The
    reconciler's work (runs.reconcile), never a read's."""
    count = 0
    due = ApprovalRequest.objects.filter(status="pending", expires_at__lte=timezone.now())
    for approval_id in due.values_list("id", flat=True):
        with transaction.atomic():
            locked = _lock_approval(approval_id)
            if locked is not None and locked[1].status == ApprovalRequest.Status.PENDING:
                _approval_close(*locked, ApprovalRequest.Status.EXPIRED, now=timezone.now(), user=None,
                                reason=EXPIRED_REASON)
                count += 1
    return count
