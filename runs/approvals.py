"""Decisions on approval requests, their escalation and their expiry: who may decide, and what a
decision does.

A request needs `quorum` approvals from distinct members of its approver role (none of them the
run's caller); each person decides a request once, and each decision is an append-only
ApprovalDecision row (who, when, how they signed in, the role they decided as, why). The approval
that reaches the quorum closes the request approved; the first denial closes it denied, whatever
approvals came before. Closing puts a waiting run back on the queue (runs.lifecycle.run_requeue),
so the call runs once, with exactly the arguments every approver saw. An approval short of the
quorum is noted in the trace (approval_recorded) and the run keeps waiting.

A request not decided by `escalate_at` moves to `escalate_to_role` (approval_escalate_due, the
reconciler's work): the first role loses it, approvals given so far stay on record but no longer
count, and the new role must find the whole quorum (someone who already decided cannot decide
again). An expired request counts as denied, escalated or not.

Every writer locks the run, then the request: deciders racing on one request are serialised by
those locks, so it closes exactly once.
"""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.fields.json import KT
from django.utils import timezone

from core import stamp as governance_stamp
from core.access import access_of
from core.api_errors import Conflict, DomainError, Forbidden, NotFound
from governance.roles import accounts_set_up_by
from runs import notify
from runs.lifecycle import run_note, run_requeue
from runs.models import ApprovalDecision, ApprovalRequest, Run, RunEvent
from runs.queue import claimed_here
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
    names |= _first_event_names(str(run.pk))
    return {name for name in names if isinstance(name, str) and name}


# run id -> the names its run_created event gives. That event is append-only (runs.append_only:
# the database refuses to change it), so what it says is read once a process: the request's
# notice and its decision ask the same. Bounded; emptied when full.
_FIRST_EVENT_NAMES: dict[str, frozenset] = {}
_FIRST_EVENT_NAMES_LIMIT = 10_000


def _first_event_names(run_id: str) -> frozenset:
    if (kept := _FIRST_EVENT_NAMES.get(run_id)) is not None:
        return kept
    # Ordered by seq alone: the model's default order starts with the run, which joins runs_run to
    # sort by the run's own ordering.
    data = (RunEvent.objects.filter(run_id=run_id, kind="run_created").order_by("seq")
            .values_list("data", flat=True).first())
    if not isinstance(data, dict):
        return frozenset()  # not written yet (or not visible to this transaction): not kept
    return remember_first_event(run_id, data)


def remember_first_event(run_id: str, data: dict) -> frozenset:
    """Keep the names a run's run_created event gives (runs.start calls it with the event it
    writes, so a decision in this process does not read it back). Those names are the caller's,
    and a triggered run's trigger authors': they may not approve it either (triggers/)."""
    names = set()
    if isinstance(data.get("caller"), dict):
        names.add(data["caller"].get("username"))
    if isinstance(data.get("origin"), dict):
        names.update(data["origin"].get("set_up_by") or ())
    if len(_FIRST_EVENT_NAMES) >= _FIRST_EVENT_NAMES_LIMIT:
        _FIRST_EVENT_NAMES.clear()
    _FIRST_EVENT_NAMES[str(run_id)] = kept = frozenset(names)
    return kept


def check_approval_decide(*, approval: ApprovalRequest, user) -> None:
    """Raise unless `user` may decide `approval` now. Separation of duties binds superusers too."""
    # The user's roles as of now, kept under the governance stamp (memberships are stamped).
    stamp = governance_stamp.current()
    if approval.approver_role.name not in access_of(user, stamp=stamp).roles:
        if approval.escalated_at is not None:
            raise Forbidden(f"this request escalated to {approval.approver_role.name!r}: only its members may decide it now")
        raise Forbidden(f"only members of {approval.approver_role.name!r} may decide this request")
    if approval.run.caller_id == user.pk or user.get_username() in _callers_recorded(approval.run):
        raise Forbidden("no one approves their own run")
    if str(user.pk) in _set_up_by(approval.run.caller_id, stamp=stamp):
        raise Forbidden("the run's caller created your account or changed your roles: someone else must decide")
    if approval.status != ApprovalRequest.Status.PENDING:
        raise Conflict(f"this request was already decided: {approval.status}", details={"status": approval.status})
    if mine := _decision_of(approval, user):
        # One decision per person: an approver who approved cannot also be the one who denies
        # (nor count twice); someone else in the role decides the rest.
        raise Conflict(f"you already {mine.decision} this request: it needs another member of "
                       f"{approval.approver_role.name!r}", details={"status": approval.status, "yours": mine.decision})


def deciders(approval: ApprovalRequest, members) -> list:
    """Those of `members` (a query of the request's approver role's members) who may decide
    `approval` now, by check_approval_decide's rule: what the rule reads of the run (who started
    it, the accounts they set up) is read once for all of them, not once a person, and whether
    each is in the role is the query's own answer."""
    if approval.status != ApprovalRequest.Status.PENDING:
        return []
    run = approval.run
    callers, set_up = _callers_recorded(run), _set_up_by(run.caller_id)
    decided = ApprovalDecision.objects.filter(approval_id=approval.pk).values("user_id")
    return [user for user in members.exclude(pk=run.caller_id).exclude(pk__in=decided).order_by("pk")
            if user.get_username() not in callers and str(user.pk) not in set_up]


# The accounts a caller set up (core.accounts), kept under the governance stamp. Sound here, not
# everywhere: an account decides a request only as a member of its role, and a change of membership
# changes the stamp in the transaction that writes the admin log's entry for it, so an account set up
# since it was read cannot decide before the stamp moves. (core.four_eyes reads it afresh: a
# superuser confirms there with no role.)
_SET_UP = governance_stamp.Kept(limit=10_000)


def _set_up_by(caller_id, *, stamp: str | None = None) -> set[str]:
    return _SET_UP.get_or_load(caller_id, lambda: accounts_set_up_by(caller_id), stamp=stamp)


def _decision_of(approval: ApprovalRequest, user) -> ApprovalDecision | None:
    """`user`'s decision on a pending `approval`, if any (from the queue's prefetch when there is one)."""
    if approval.approvals_count == 0 and approval.escalated_at is None:
        # No one has decided it: an approval is counted as it is recorded, and the first denial
        # closes the request; only an escalation sets the count back with decisions on record.
        # (The unique (approval, user) stands behind this, as behind every check made here.)
        return None
    return next((d for d in approval.decisions.all() if d.user_id == user.pk), None)


def _lock_approval(approval_id) -> tuple[Run, ApprovalRequest] | None:
    """Lock the run, then its approval request."""
    # A decision needs neither the run's frozen snapshot nor its state, only the caller the
    # snapshot names: read with the run, in the statement that locks it. Its agent and caller
    # come in the same statement for the notice a decision sends (runs.notify); only the run's
    # row is locked (of=self). Found through the request by a join, cheaper to build than a
    # subquery of it (3.0 against 3.7 ms of CPU a lock on the bench's SQLite).
    # In-process (no broker), the run a decision requeues is claimed by this very process
    # (runs.queue): it reads the snapshot and state here rather than again at the claim.
    runs = Run.objects.select_for_update(of=("self",)).select_related("agent", "caller")
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        runs = runs.defer("snapshot", "state")
    run = (runs.filter(approvals__id=approval_id)
           .annotate(snapshot_caller=KT("snapshot__caller__username")).first())
    if run is None:
        return None
    approval = (ApprovalRequest.objects.select_for_update(of=("self",))
                .select_related("approver_role", "escalate_to_role").get(id=approval_id))
    approval.run = run
    return run, approval


def approval_decide(*, approval_id, user, approve: bool, reason: str = "", via: str) -> ApprovalRequest:
    """`via`: how `user` authenticated ('session', or 'token:' and the token's public id),
    recorded on the decision and in its event."""
    claim_for = claimed_here()  # in-process, the run a decision resumes is claimed in its write
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
            _record_decision(run, approval, user=user, approve=approve, reason=reason, via=via, now=now,
                             claim_for=claim_for)
    if expired:
        raise Conflict("this request expired before a decision; it counts as denied", details={"status": "expired"})
    return approval


def _record_decision(run: Run, approval: ApprovalRequest, *, user, approve: bool, reason: str, via: str,
                     now, claim_for: str | None) -> None:
    """Insert `user`'s decision; close the request if it denies or reaches the quorum."""
    decision = (ApprovalDecision.Decision.APPROVED if approve else ApprovalDecision.Decision.DENIED).value
    try:
        # The unique (approval, user) backs the check made under the locks. No savepoint: the
        # Conflict raised here undoes the decision's whole transaction, so nothing goes on after
        # the failed insert.
        ApprovalDecision.objects.create(approval=approval, user=user, username=user.get_username(),
                                        role=approval.approver_role.name, decision=decision, reason=reason, via=via)
    except IntegrityError:
        raise Conflict("you already decided this request", details={"status": approval.status}) from None
    if approve:
        approval.approvals_count += 1
    if not approve or approval.approvals_count >= approval.quorum:
        status = ApprovalRequest.Status.APPROVED if approve else ApprovalRequest.Status.DENIED
        _approval_close(run, approval, status, now=now, user=user, reason=reason, via=via, claim_for=claim_for)
        return
    approval.save(update_fields=["approvals_count"])
    run_note(run, (run.step, "approval_recorded", {
        "approval_id": str(approval.id), "tool": approval.tool, "decision": decision,
        "decided_by": user.get_username(), "role": approval.approver_role.name, "reason": reason,
        "decided_via": via, "approvals": approval.approvals_count, "quorum": approval.quorum}))
    notify.approval_recorded(approval, by=user)  # the others who may still decide are told, after commit


def _approved_by(approval: ApprovalRequest) -> list[str]:
    """Who approved it as its current role, in order: the approvals its quorum counted."""
    return list(approval.decisions.filter(decision=ApprovalDecision.Decision.APPROVED, role=approval.approver_role.name)
                .order_by("created_at", "id").values_list("username", flat=True))


def _approval_close(run: Run, approval: ApprovalRequest, status: str, *, now, user, reason: str, via: str = "",
                    claim_for: str | None = None) -> None:
    approval.status, approval.decided_by, approval.decided_at, approval.reason = status, user, now, reason
    approval.decided_via = via
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason", "decided_via", "approvals_count"])
    decided = (run.step, "approval_decided", {
        "approval_id": str(approval.id), "tool": approval.tool, "decision": status,
        "decided_by": user.get_username() if user else None, "reason": reason, "decided_via": via or None})
    if approval.quorum > 1:  # which approvals the quorum counted (a single approver is decided_by)
        decided[2].update(quorum=approval.quorum, approved_by=_approved_by(approval))
    if run.status in (RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_BUDGET):  # a budget ask resumes it too
        # Time spent waiting for a human does not count against the run's own deadline.
        waited = now - approval.created_at
        run_requeue(run, decided=decided, deadline_at=(run.deadline_at + waited) if run.deadline_at else None,
                    claim_for=claim_for)
    else:
        run_note(run, decided)
    notify.approval_decided(approval)  # the caller is told, after commit


def approval_expire_due(*, now=None) -> int:
    """Close every pending request past its deadline as expired, and resume its run. The
    reconciler's work (runs.reconcile), never a read's. `now`: the clock (tests move it)."""
    count = 0
    now = now or timezone.now()
    due = ApprovalRequest.objects.filter(status="pending", expires_at__lte=now)
    for approval_id in due.values_list("id", flat=True):
        with transaction.atomic():
            locked = _lock_approval(approval_id)
            if locked is not None and locked[1].status == ApprovalRequest.Status.PENDING:
                _approval_close(*locked, ApprovalRequest.Status.EXPIRED, now=now, user=None, reason=EXPIRED_REASON)
                count += 1
    return count


def approval_escalate_due(*, now=None) -> int:
    """Move every pending request whose escalation is due (and that has not expired) to the role
    it escalates to: the reconciler's work. Once only: an escalated request does not move again."""
    count = 0
    now = now or timezone.now()
    due = ApprovalRequest.objects.filter(status="pending", escalated_at__isnull=True, escalate_to_role__isnull=False,
                                         escalate_at__lte=now, expires_at__gt=now)
    for approval_id in due.values_list("id", flat=True):
        with transaction.atomic():
            locked = _lock_approval(approval_id)
            if locked is None:
                continue
            run, approval = locked
            if (approval.status == ApprovalRequest.Status.PENDING and approval.escalated_at is None
                    and approval.escalate_to_role_id is not None and approval.expires_at > now):
                _escalate(run, approval, now=now)
                count += 1
    return count


def _escalate(run: Run, approval: ApprovalRequest, *, now) -> None:
    first, counted = approval.approver_role, approval.approvals_count
    approval.escalated_from_role, approval.approver_role = first, approval.escalate_to_role
    approval.escalated_at, approval.approvals_count = now, 0
    approval.save(update_fields=["escalated_from_role", "approver_role", "escalated_at", "approvals_count"])
    run_note(run, (run.step, "approval_escalated", {
        "approval_id": str(approval.id), "tool": approval.tool, "from_role": first.name,
        "to_role": approval.approver_role.name, "escalate_at": approval.escalate_at.isoformat(),
        "approvals_before": counted, "quorum": approval.quorum}))
    notify.approval_escalated(approval)  # the role it moved to is told, after commit
