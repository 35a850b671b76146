"""A run's transitions, each a named service checked against the table in runs.states.

run_claim      queued -> running (or a running run whose lease lapsed, taken over); in-process
               (no broker) a run is claimed in the write that queues it (run_claim_new at its
               start, run_requeue after a decision)
run_checkpoint running -> running, a step saved; or its end, or its park, in the same transaction
               (and, as a rule, the same compare-and-set)
run_park       running -> awaiting_approval, with the approval request (awaiting_budget, with a
               request of kind budget, when a budget ran out: runs.budget)
run_finish     any live status -> a terminal one, with the receipt sealed in the same transaction
run_release    running -> queued, its time slice used
run_requeue    awaiting_approval or awaiting_budget -> queued, after a decision
run_cancel     a cancel asked for; a run that is not running ends here, a running one at its next step
run_note       an event and no change of status (a decision on a run that is not parked)

One function writes a run's row: _write, a compare-and-set through
Run.objects.filter(id=..., status=..., event_seq=..., cancel_requested=..., ...).update(...).
Its condition holds the status, the trace's length and the cancel flag this process knows (the
columns other writers touch), so an UPDATE that matches changed exactly the row we read: the new
event_seq is ours to compute, with no read back. Writers that read the run under its row lock
always match; a worker that holds the lease and was overtaken by a cancel or a decision reads the
row again and retries while the lease is still its own.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import stamp as governance_stamp
from core.api_errors import Conflict
from runs import harness, notify, outcome_refusals
from runs.approval_routing import request_routing
from runs.events import chain_rows, insert_rows, tip
from runs.models import ApprovalRequest, Run
from runs.queue import enqueue
from runs.receipts import receipt_seal
from runs.states import TERMINAL, ErrorCode, RunStatus, check_transition

logger = logging.getLogger(__name__)


def _write(run: Run, *, status: str | None = None, expect: dict | None = None, fields: dict | None = None,
           events: list = (), follow: bool = False, via: str | None = None) -> bool:
    """Compare-and-set the run's row: if it still has the status, event_seq and cancel flag this
    process knows (and the values in `expect`), set `status` (checked against the transition table) and
    `fields`, take the next len(events) sequence numbers and write `events` (step, kind, data).
    Updates `run` to match. False if the row had moved on. `via`: a status the run passes through
    on the way to `status` in this one write (queued, for a run claimed as it is queued).

    `follow`: when only the trace or the cancel flag moved on (a cancel, a decision) and status
    and `expect` still hold, lock and read the row again and retry with what it holds now."""
    assert transaction.get_connection().in_atomic_block, "a run's row changes with its events, in one transaction"
    values = dict(fields or {})
    if status is not None and status != run.status:
        for before, after in ((run.status, via), (via, status)) if via else ((run.status, status),):
            check_transition(before, after)
        values |= {"status": status, "status_changed_at": timezone.now()}
    expect = expect or {}
    rows = head = None
    while True:
        if events:  # the condition holds event_seq to what we know: the new value is ours to say
            # Chained first, so the same statement sets the new tip (Run.trace_tip) with event_seq.
            rows, head = chain_rows(run, run.event_seq + 1, list(events))
            values |= {"event_seq": head[0], "trace_tip": tip(head)}
        if Run.objects.filter(id=run.id, status=run.status, event_seq=run.event_seq,
                              cancel_requested=run.cancel_requested, **expect).update(**values):
            break
        if not follow:
            return False
        seen = (Run.objects.select_for_update().filter(id=run.id)
                .values("status", "event_seq", "cancel_requested", "trace_tip", *expect).first())
        if seen is None or seen["status"] != run.status or any(seen[k] != v for k, v in expect.items()):
            return False
        run.event_seq, run.cancel_requested, run.trace_tip = seen["event_seq"], seen["cancel_requested"], seen["trace_tip"]
    for name, value in values.items():
        setattr(run, name, value)
    if events:
        insert_rows(run, rows, head)
        run.written_head = head
    return True


def _locked(run_id) -> Run | None:
    """The run, read under its row lock."""
    return Run.objects.select_for_update().filter(id=run_id).first()


def _lease() -> timedelta:
    return timedelta(seconds=settings.WARRANT["LEASE_SECONDS"])


# --- claim and checkpoint -------------------------------------------------------------------


def run_claim(run_id, worker: str, *, known: Run | None = None) -> Run | None:
    """queued -> running, or take over a running run whose lease lapsed. The run if we own it.

    `known`: the run as this process last wrote it (the embedded default hands on the run it just
    started, or requeued after a decision, claimed in that same write: runs.queue.claimed_here); taken as it
    is if `worker` holds it, else claimed without a read if its row is still as written. A run a
    decision read without its snapshot and state has them read once it is ours."""
    if known is not None and known.status == RunStatus.RUNNING and known.lease_owner == worker:
        return _whole(known)
    now = timezone.now()
    with transaction.atomic():
        if known is not None and known.status == RunStatus.QUEUED and _claimed(known, worker, now):
            return _whole(known)
        run = _locked(run_id)
        claimable = run is not None and (run.status == RunStatus.QUEUED or (
            run.status == RunStatus.RUNNING and run.lease_expires_at is not None and run.lease_expires_at < now))
        if not claimable or not _claimed(run, worker, now):
            return None
    return run


def _whole(run: Run) -> Run:
    if deferred := {"snapshot", "state"} & run.get_deferred_fields():
        run.refresh_from_db(fields=sorted(deferred))
    return run


def claim(run: Run, worker: str, now) -> tuple[dict, dict, tuple]:
    """What claiming `run` for `worker` writes (its columns), holds the row to (a row that moved
    since, by another claim or a cancel, is not claimed) and says (its event)."""
    fields = {"lease_owner": worker, "lease_expires_at": now + _lease(), "deliveries": run.deliveries + 1,
              "status_changed_at": now}
    if run.started_at is None and run.deliveries < settings.WARRANT["MAX_DELIVERIES"]:
        fields |= {"started_at": now, "deadline_at": now + timedelta(seconds=run.snapshot["agent"]["deadline_seconds"])}
    expect = {"deliveries": run.deliveries, "lease_owner": run.lease_owner, "lease_expires_at": run.lease_expires_at,
              "step": run.step}
    return fields, expect, (run.step, "claimed", {"worker": worker, "delivery": run.deliveries + 1})


def run_claim_new(run: Run, worker: str) -> tuple:
    """queued -> running for a run not yet written (runs.start, in-process): its claim's columns set,
    its event returned for the row's first events."""
    check_transition(RunStatus.QUEUED, RunStatus.RUNNING)
    fields, _expect, event = claim(run, worker, timezone.now())
    for name, value in {"status": RunStatus.RUNNING, **fields}.items():
        setattr(run, name, value)
    return event


def _claimed(run: Run, worker: str, now) -> bool:
    fields, expect, event = claim(run, worker, now)
    return _write(run, status=RunStatus.RUNNING, expect=expect, fields=fields, events=[event])


def run_checkpoint(run: Run, worker: str, result: harness.StepResult) -> Run | None:
    """Save a step, its events and what it led to (the run's end, or its park) in one
    transaction. None if we lost the lease."""
    state, outcome = result.state, result.outcome
    counters = {
        "deliveries": 0, "input_tokens": state["input_tokens"], "output_tokens": state["output_tokens"],
        "llm_calls": state["turns"], "tool_calls": state["tool_calls"], "tainted": state["tainted"],
        "taint_reason": "\n".join(state["taint_reasons"]),
    }
    # The row is as this worker last wrote it (the compare-and-set below holds it to that): a
    # column the step left as it was is not written again.
    fields = {"state": state, "step": run.step + 1, "lease_expires_at": timezone.now() + _lease(),
              **{name: value for name, value in counters.items() if getattr(run, name) != value}}
    events = [(run.step, kind, data) for kind, data in result.events]
    finish = outcome if isinstance(outcome, harness.Finish) else None
    now = timezone.now()
    if finish is not None:  # the step that ends the run writes its end in the same statement
        fields |= _finished(run, finish, now, state=state)
        events.append((run.step + 1, *_finished_event(finish)))
    with transaction.atomic():
        if isinstance(outcome, harness.Park) and _parked_with_step(run, worker, outcome, fields, events):
            return run
        # On (status, lease, step): a cancel or a decision that came meanwhile is followed, and
        # its cancel flag read; a lost lease is not.
        if not _write(run, status=finish.status if finish else None, expect={"lease_owner": worker, "step": run.step},
                      fields=fields, events=events, follow=True):
            logger.warning("run %s: lease lost before step %s was saved; another worker has it", run.id, run.step)
            return None
        if finish is not None:
            # A running run has no pending request: one is made only with the park, in its
            # transaction, and the run leaves its park only once the request is closed (or ends
            # with it cancelled, by run_finish). So no request is closed here.
            _after_finish(run, finish, now, open_requests=False)
        elif isinstance(outcome, harness.Park):
            _park_or_finish(run, outcome)
    return run


def run_release(run: Run, worker: str) -> None:
    """running -> queued: the time slice is used; the next message goes on from here."""
    with transaction.atomic():
        if not _write(run, status=RunStatus.QUEUED, expect={"lease_owner": worker},
                      fields={"lease_owner": "", "lease_expires_at": None}, follow=True):
            raise Conflict(f"run {run.id} changed status concurrently")
        enqueue(run.id, known=run)


# --- park -----------------------------------------------------------------------------------


def _park_or_finish(run: Run, park: harness.Park) -> None:
    """Park the run for its approver. A run cancelled while its step ran does not go on to wait
    for one; nor does one whose approver role no longer exists (fail closed)."""
    if run.cancel_requested:
        run_finish(run, harness.Finish(RunStatus.CANCELLED, message="cancelled while a step was running"))
        return
    role = _role(park.approver_role)
    if role is None:
        run_finish(run, harness.Finish(RunStatus.FAILED, error=ErrorCode.POLICY_ERROR,
                                       message=f"the approver role {park.approver_role!r} does not exist"))
        return
    run_park(run, park, role)


# Roles by name, kept under the governance stamp (auth_group is stamped, so a role renamed or
# deleted drops them): a park builds no query for its approver role.
_ROLES = governance_stamp.Kept(limit=1_000)


def _role(name: str) -> Group | None:
    return _ROLES.get_or_load(name, lambda: Group.objects.filter(name=name).first())


def _parked_with_step(run: Run, worker: str, park: harness.Park, fields: dict, events: list) -> bool:
    """The step and its park in one write: the step's columns and events, the new status and the
    request's event in one compare-and-set, when the row is as this worker last wrote it, the
    approver role exists and the call has no request yet (the common case). False with nothing
    written otherwise: the caller then saves the step and parks, or ends the run, as it says."""
    if run.cancel_requested:
        return False
    role = _role(park.approver_role)
    if role is None:
        return False
    request = None
    try:
        with transaction.atomic():  # undone whole when the row moved on or the request exists
            request = _new_request(run, park, role)
            if not _park(run, park, role, request, expect={"lease_owner": worker, "step": run.step},
                         fields=fields, events=events):
                transaction.set_rollback(True)
                return False
    except IntegrityError:
        if request is not None:
            raise  # not the request's own unique key: say what the database refused
        return False
    return True


def run_park(run: Run, park: harness.Park, role: Group) -> ApprovalRequest:
    """running -> awaiting_approval, with the request for this call; inside the step's transaction."""
    request = approval_request_for(run, park, role)
    if not _park(run, park, role, request):
        raise Conflict(f"run {run.id} changed status concurrently")
    return request


def _park(run: Run, park: harness.Park, role: Group, request: ApprovalRequest, *, expect: dict | None = None,
          fields: dict | None = None, events: list = ()) -> bool:
    fields = dict(fields or {})
    asked = (fields.get("step", run.step), "approval_requested", {
        "approval_id": str(request.id), "tool": park.tool, "arguments": park.arguments,
        "arguments_sha256": park.arguments_sha256, "approver_role": role.name, "policy": park.policy,
        "reasons": park.reasons,
        # Where each argument came from, for the approver's card (runs.provenance).
        "provenance": park.provenance})
    status = RunStatus.AWAITING_APPROVAL
    if isinstance(park, harness.ParkBudget):  # a budget ran out: the run waits for more of it (runs.budget)
        status, asked = RunStatus.AWAITING_BUDGET, (asked[0], "budget_requested", {
            "approval_id": str(request.id), "approver_role": role.name, "budget": park.budget, "reasons": park.reasons})
    parked = _write(run, status=status, expect=expect,
                    fields=fields | {"lease_owner": "", "lease_expires_at": None}, events=[*events, asked])
    if parked:
        notify.approval_raised(request)  # sent after commit: a park undone tells no one
    return parked


def approval_request_for(run: Run, park: harness.Park, role: Group) -> ApprovalRequest:
    """The request for this call and these exact arguments: created, or the one already there."""
    try:
        # A call parks once (a decided one is not asked again), so try the insert first; the
        # unique (run, call, digest) finds a request that is already there.
        with transaction.atomic():
            return _new_request(run, park, role)
    except IntegrityError:
        return ApprovalRequest.objects.get(run=run, call_id=park.call_id, arguments_sha256=park.arguments_sha256)


def _new_request(run: Run, park: harness.Park, role: Group) -> ApprovalRequest:
    ttl = park.ttl_seconds or settings.WARRANT["DEFAULT_APPROVAL_TTL_SECONDS"]
    return ApprovalRequest.objects.create(
        run=run, call_id=park.call_id, arguments_sha256=park.arguments_sha256, step=park.step, tool=park.tool,
        arguments=park.arguments, policy_id=park.policy["policy_id"] if park.policy else None,
        policy_version=park.policy["version"] if park.policy else None,
        policy_name=park.policy["policy"] if park.policy else "",
        approver_role=role, reasons=park.reasons, model_rationale=park.rationale,
        expires_at=timezone.now() + timedelta(seconds=ttl), **request_routing(park, timezone.now()),
        **({"kind": ApprovalRequest.Kind.BUDGET, "budget": park.budget} if isinstance(park, harness.ParkBudget) else {}),
    )


def run_requeue(run: Run, *, decided: tuple, deadline_at, claim_for: str | None = None) -> None:
    """awaiting_approval (or awaiting_budget) -> queued after a decision (its event numbered by the
    same statement); the run's deadline moved on by the time it waited. `run` was read under its row
    lock. `claim_for`: runs.queue.claimed_here() as the decision's transaction began; then queued ->
    running too, in the same statement, for this process to advance the run once this commits."""
    fields, events = {"deadline_at": deadline_at}, [decided]
    if worker := claim_for:
        claim_columns, _expect, event = claim(run, worker, timezone.now())  # the lock holds the row as read
        fields = claim_columns | fields  # the deadline moved on by the wait, whatever a claim would set
        events.append(event)
    if not _write(run, status=RunStatus.RUNNING if claim_for else RunStatus.QUEUED,
                  via=RunStatus.QUEUED if claim_for else None, fields=fields, events=events):
        raise Conflict(f"run {run.id} changed status concurrently")
    enqueue(run.id, known=run)


def run_note(run: Run, event: tuple) -> None:
    """Append one event (step, kind, data) to a run read under its row lock; its status stays."""
    if not _write(run, events=[event]):
        raise Conflict(f"run {run.id} changed concurrently")


# --- finish and cancel ------------------------------------------------------------------------


def _finished(run: Run, finish: harness.Finish, now, *, state: dict | None = None) -> dict:
    """The columns a run's end writes, besides its status. `state`: the state the ending step
    wrote, when it wrote one. What the run was refused is written here, so the receipt sealed in
    the same transaction reads the same columns (runs.outcome_refusals)."""
    return {"output": finish.output, "stop_reason": finish.stop_reason, "error": finish.error,
            "error_message": finish.message, "finished_at": now, "lease_owner": "", "lease_expires_at": None,
            "started_at": run.started_at or now, **outcome_refusals.summary(outcome_refusals.of_run(run, state))}


def _finished_event(finish: harness.Finish) -> tuple[str, dict]:
    return "run_finished", {"status": finish.status, "stop_reason": finish.stop_reason, "error": finish.error,
                            "message": finish.message}


def run_finish(run: Run, finish: harness.Finish) -> None:
    """A live status -> a terminal one, inside the caller's transaction (which read `run` under
    its lock, or holds its lease and wrote it last)."""
    now = timezone.now()
    if not _write(run, status=finish.status, fields=_finished(run, finish, now),
                  events=[(run.step, *_finished_event(finish))]):
        raise Conflict(f"run {run.id} changed status concurrently")
    _after_finish(run, finish, now)


def _after_finish(run: Run, finish: harness.Finish, now, *, open_requests: bool = True) -> None:
    """In the transaction that ended the run: close its open requests and seal its receipt.
    `open_requests`: False when the run ended from running, which leaves no request open."""
    if open_requests and run.state["parks"]:  # a run that never parked has no approval requests
        ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).update(
            status=ApprovalRequest.Status.CANCELLED, decided_at=now, reason=f"run ended {finish.status}")
    # The receipt seals the trace's head as this transaction wrote it (uncommitted, and sealed
    # with it or not at all).
    run.trace_head = run.written_head
    receipt_seal(run=run)


def run_cancel(*, run: Run, user) -> Run:
    """Ask a run to stop. A running run is owned by its worker: it stops at the next step boundary
    and seals the receipt itself. A queued or parked one ends here."""
    with transaction.atomic():
        run = _locked(run.id)
        if run.status in TERMINAL:
            raise Conflict(f"the run already ended: {run.status}", details={"status": run.status})
        if not _write(run, fields={"cancel_requested": True}, events=[(run.step, "cancel_requested", {"by": user.get_username()})]):
            raise Conflict(f"run {run.id} changed concurrently")
        if run.status != RunStatus.RUNNING:
            run_finish(run, harness.Finish(RunStatus.CANCELLED, message=f"cancelled by {user.get_username()}"))
    return run
