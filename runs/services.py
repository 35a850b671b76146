"""The orchestrator's workflows. The only writers of Run.status, each transition in one place.

A task calls run_advance: claim the run (compare-and-set plus a lease), take steps outside any
transaction, checkpoint each step in one short transaction, and stop when the run parks, ends
or its time slice is used (then re-enqueue). A duplicate message finds nothing to claim.
"""

import hashlib
import logging
import os
import socket
import time
import uuid
from functools import lru_cache, partial
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.model_calls import model_complete, profile_chain
from agents.models import Agent
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from core.api_errors import Conflict, DomainError, Forbidden, NotFound, Unprocessable
from governance import redaction
from core.access import access_of
from governance.roles import account_set_up_by
from governance.rows import from_row, insert_row
from governance.selectors import granted_tool_names
from runs import harness
from runs.freeze import governance_for
from runs.models import ApprovalRequest, Run, RunEvent
from runs.outbox import side_effect_execute
from runs.receipts import receipt_seal
from runs.witness import witness_catch_up
from runs.states import TERMINAL, ErrorCode, RunStatus, check_transition
from runs.statements import event_hash_sql, event_insert, update_sql
from runs.trace import GENESIS, chain_event

logger = logging.getLogger(__name__)
MAX_INPUT_CHARS = 20_000


class InvalidRunRequest(DomainError):
    code = "invalid"


# --- start ------------------------------------------------------------------------------


def _request_digest(agent_slug: str, input_text: str) -> str:
    return hashlib.sha256(f"{agent_slug}\x00{input_text}".encode()).hexdigest()


def run_start(*, agent_slug: str, input_text: str, caller, idempotency_key: str | None = None,
              governance_stamp: str | None = None) -> tuple[Run, bool]:
    """Create a queued run with its governance frozen, and enqueue it. Returns (run, created).

    `governance_stamp`: the stamp read when the run was asked for (the API reads it with the
    caller's permission); by default it is read here.
    """
    if not isinstance(input_text, str) or not input_text.strip():
        raise InvalidRunRequest("input is required", details={"input": ["This field is required."]})
    if len(input_text) > MAX_INPUT_CHARS:
        raise InvalidRunRequest(f"input is longer than {MAX_INPUT_CHARS} characters", details={"input": ["too long"]})
    if idempotency_key is not None and not (0 < len(idempotency_key) <= 128):
        raise InvalidRunRequest("an idempotency key has 1 to 128 characters", details={"idempotency_key": ["bad length"]})
    digest = _request_digest(agent_slug, input_text)
    if idempotency_key:
        existing = Run.objects.filter(caller=caller, idempotency_key=idempotency_key).first()
        if existing is not None:
            if existing.request_sha256 != digest:
                raise Unprocessable("this idempotency key was used for a different request",
                                    details={"idempotency_key": idempotency_key})
            return existing, False
    governance, snapshot = governance_for(agent_slug=agent_slug, caller=caller, stamp=governance_stamp)
    if governance is None:
        raise InvalidRunRequest(f"there is no agent {agent_slug!r}", details={"agent": [f"unknown agent {agent_slug!r}"]})
    if snapshot is None:
        raise Conflict(f"agent {agent_slug!r} has no published version", details={"agent": agent_slug})
    agent, version = governance.agent, governance.version
    try:
        run = _create(agent=agent, version=version, caller=caller, snapshot=snapshot, input_text=input_text,
                      idempotency_key=idempotency_key, digest=digest)
    except IntegrityError:
        if not idempotency_key:
            raise
        # A concurrent request with the same key won the insert: answer as its retry would be.
        return run_start(agent_slug=agent_slug, input_text=input_text, caller=caller, idempotency_key=idempotency_key)
    return run, True


def _create(*, agent: Agent, version, caller, snapshot: dict, input_text: str, idempotency_key: str | None, digest: str) -> Run:
    with transaction.atomic():
        run = Run(
            agent=agent, agent_version=version, caller=caller, caller_roles=snapshot["caller"]["roles"],
            idempotency_key=idempotency_key or None, request_sha256=digest, input=input_text,
            snapshot=snapshot, policy_snapshot_sha256=snapshot["policy_snapshot_sha256"],
            state=harness.initial_state(input_text), event_seq=1,
        )
        insert_row(run)
        _write_events(run, 1, [(0, "run_created", {
            "agent": agent.slug, "agent_version": snapshot["agent"]["version"], "caller": snapshot["caller"],
            "policy_snapshot_sha256": run.policy_snapshot_sha256})])
        _enqueue(run.id)
    return run


def _enqueue(run_id) -> None:
    # Only after commit: a worker must never pick up a run whose row it cannot see yet.
    # With a real broker a failed publish is logged, not raised: the change it follows is
    # committed, and the reconciler re-enqueues a queued run whose message never arrived.
    transaction.on_commit(partial(_publish, str(run_id)), robust=not settings.CELERY_TASK_ALWAYS_EAGER)


def _publish(run_id: str) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        # The embedded default has no broker: the run advances here and now, as the task would
        # (Celery's eager apply around these few lines cost as much as one of the run's tools).
        # Named as the eager task named itself: the lease's owner must be unique across hosts.
        run_advance(run_id=run_id, worker=f"{socket.gethostname()}:{os.getpid()}")
        return
    from runs.tasks import run_advance_task

    try:
        run_advance_task.apply_async((run_id,), retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2})
    except Exception:
        logger.exception("could not enqueue run %s; the reconciler will", run_id)


def _update_returning(run_id, *, where: dict, values: dict, add: dict, returning: tuple[str, ...]) -> tuple | None:
    """UPDATE the run's row (if it still matches `where`) and read `returning` back in the same
    statement, so the values are those of the row as this write left it, under its lock. None
    when no row matched. `add` increments integer columns."""
    if not connection.features.can_return_columns_from_insert:
        updates = {name: F(name) + amount for name, amount in add.items()} | values
        if Run.objects.filter(id=run_id, **where).update(**updates) != 1:
            return None
        return Run.objects.filter(id=run_id).values_list(*returning).get()
    # UPDATE ... RETURNING (PostgreSQL, SQLite 3.35+); the statement is built once per shape.
    sql, set_fields, where_fields = update_sql(tuple(values), tuple(add), tuple(where), returning)
    params = [value if type(value) is plain else field.get_db_prep_save(value, connection)
              for (field, plain), value in zip(set_fields, values.values())]
    params += add.values()
    params += [value if type(value) is plain else field.get_db_prep_value(value, connection)
               for (field, plain), value in zip(where_fields, (run_id, *where.values()))]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _take_seqs(run: Run, count: int) -> int:
    """Reserve the next `count` sequence numbers of the run's trace; the first of them.

    The increment locks the run's row until the transaction ends, and rolls back with it, so
    concurrent writers get consecutive numbers in commit order, without gaps or repeats."""
    assert transaction.get_connection().in_atomic_block, "events are written inside the transaction that numbers them"
    (run.event_seq,) = _update_returning(run.id, where={}, values={}, add={"event_seq": count}, returning=("event_seq",))
    return run.event_seq - count + 1


def _write_events(run: Run, first_seq: int, events: list[tuple[int, str, dict]]) -> None:
    """Insert events, (step, kind, data) each, numbered from `first_seq` (reserved by the
    caller), in one statement, each hash-chained to the one before it."""
    # The trace is written redacted (secrets, card numbers, emails as configured): the run's own
    # state keeps what it needs to resume, the receipt keeps digests.
    kinds, secrets = settings.WARRANT["REDACT"], redaction.env_secrets()
    # One plain multi-row INSERT: bulk_create's per-object machinery cost more than the write.
    fields, insert, placeholders = event_insert()
    run_id = fields[0].get_db_prep_save(run.id, connection)
    now = fields[6].get_db_prep_save(timezone.now(), connection)
    prev = _trace_head_at(run, run_id, first_seq - 1)
    rows = []
    for seq, (step, kind, data) in enumerate(events, start=first_seq):
        data = redaction.redact(data, kinds=kinds, secrets=secrets)
        prev, data = chain_event(prev=prev, seq=seq, step=step, kind=kind, data=data)
        rows.append((run_id, seq, step, kind, fields[4].get_db_prep_save(data, connection), prev, now))
    # The next write of this run in this process chains to it without a read, once it is
    # committed: a rolled-back write must leave nothing to chain to.
    transaction.on_commit(partial(setattr, run, "trace_head", (first_seq + len(events) - 1, prev)))
    per_statement = max(1, (connection.features.max_query_params or 60_000) // len(fields))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            cursor.execute(insert + ", ".join([placeholders] * len(chunk)), [value for row in chunk for value in row])


def _trace_head_at(run: Run, run_id, seq: int) -> str:
    """The hash of the run's event #seq, the link the next event chains to. This process's last
    write of the run knows it, unless another writer (a cancel, a decision) wrote since."""
    if seq <= 0:
        return GENESIS
    known = getattr(run, "trace_head", None)
    if known is not None and known[0] == seq:
        return known[1]
    with connection.cursor() as cursor:
        cursor.execute(event_hash_sql(), [run_id, seq])
        row = cursor.fetchone()
    return row[0] if row else GENESIS


def _event(run: Run, kind: str, data: dict, *, step: int | None = None) -> None:
    """Append one event to the run's trace, inside the caller's transaction."""
    _write_events(run, _take_seqs(run, 1), [(run.step if step is None else step, kind, data)])


# --- advance ----------------------------------------------------------------------------


def _claim(run_id, worker: str) -> Run | None:
    """queued -> running, or take over a running run whose lease expired. The run if we own it."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.WARRANT["LEASE_SECONDS"])
    with transaction.atomic():
        # Read under the row lock the UPDATE took: the cancel flag and the trace's sequence are
        # as of this claim, and the "claimed" event takes the number the UPDATE reserved.
        run = _claim_update(run_id, worker, now, lease)
        if run is None:
            return None
        if run.started_at is None and run.deliveries <= settings.WARRANT["MAX_DELIVERIES"]:
            run.started_at = now
            run.deadline_at = now + timedelta(seconds=run.snapshot["agent"]["deadline_seconds"])
            _update_returning(run.id, where={}, values={"started_at": run.started_at, "deadline_at": run.deadline_at},
                              add={}, returning=("id",))
        _write_events(run, run.event_seq, [(run.step, "claimed", {"worker": worker, "delivery": run.deliveries})])
    return run


def _claim_update(run_id, worker: str, now, lease) -> Run | None:
    """The claim's compare-and-set, and the run as it left it (None if it was not claimable)."""
    if not connection.features.can_return_columns_from_insert:
        claimable = Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
        changed = Run.objects.filter(claimable, id=run_id).update(
            status=RunStatus.RUNNING, status_changed_at=now, lease_owner=worker, lease_expires_at=lease,
            deliveries=F("deliveries") + 1, event_seq=F("event_seq") + 1,
        )
        return Run.objects.get(id=run_id) if changed == 1 else None
    # UPDATE ... RETURNING every column: the claim and the read in one statement.
    def prep(name: str, value):
        return Run._meta.get_field(name).get_db_prep_value(value, connection)

    params = [RunStatus.RUNNING, prep("status_changed_at", now), worker, prep("lease_expires_at", lease),
              prep("id", run_id), RunStatus.QUEUED, RunStatus.RUNNING, prep("lease_expires_at", now)]
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        row = cursor.fetchone()
    return from_row(Run, row) if row else None


@lru_cache(maxsize=1)
def _claim_sql() -> str:
    opts, qn = Run._meta, connection.ops.quote_name
    col = {name: qn(opts.get_field(name).column) for name in (
        "id", "status", "status_changed_at", "lease_owner", "lease_expires_at", "deliveries", "event_seq")}
    returning = ", ".join(qn(field.column) for field in opts.concrete_fields)
    return (f"UPDATE {qn(opts.db_table)} SET {col['status']} = %s, {col['status_changed_at']} = %s, "
            f"{col['lease_owner']} = %s, {col['lease_expires_at']} = %s, "
            f"{col['deliveries']} = {col['deliveries']} + 1, {col['event_seq']} = {col['event_seq']} + 1 "
            f"WHERE {col['id']} = %s AND ({col['status']} = %s OR ({col['status']} = %s AND {col['lease_expires_at']} < %s)) "
            f"RETURNING {returning}")


def _deps(run: Run) -> harness.Deps:
    snapshot = run.snapshot
    chain = profile_chain(snapshot["agent"]["model_profile"])
    caller = snapshot["caller"]["username"]

    def execute(call: dict, *, side_effect: bool, approval_id: str | None) -> dict:
        tool = snapshot["tools"][call["name"]]
        if side_effect:
            return side_effect_execute(run_id=str(run.id), caller=caller, tool=tool, call=call, approval_id=approval_id)
        return dispatch(tool=tool, arguments=call["arguments"], ctx=ToolContext(str(run.id), caller))

    return harness.Deps(
        complete=partial(model_complete, chain=chain),
        execute=execute,
        granted_now=lambda: granted_tool_names(role_names=snapshot["caller"]["roles"]),
        leaks=lambda arguments: redaction.leaks(arguments, secrets=redaction.env_secrets()),
    )


def _decisions(run: Run) -> dict[str, dict]:
    return {
        harness.decision_key(a.call_id, a.arguments_sha256): {"id": str(a.id), "status": a.status, "reason": a.reason}
        for a in ApprovalRequest.objects.filter(run=run).only("id", "call_id", "arguments_sha256", "status", "reason")
    }


def _decisions_needed(run: Run) -> bool:
    """Only a tool batch consults approvals, and only a run that has parked can have any (runs
    checkpointed before `parks` was counted are asked anyway)."""
    return bool(run.state["pending"]) and run.state.get("parks", 1) > 0


def run_advance(*, run_id: str, worker: str | None = None) -> None:
    worker = worker or f"w-{uuid.uuid4().hex[:12]}"
    run = _claim(run_id, worker)
    if run is None:
        return  # parked, finished, or owned by a live worker: a duplicate delivery is a no-op
    if run.deliveries > settings.WARRANT["MAX_DELIVERIES"]:
        with transaction.atomic():
            _finish(run, harness.Finish(RunStatus.FAILED, error="internal",
                                        message=f"step {run.step} was attempted {run.deliveries} times without finishing"))
        return
    deps = _deps(run)
    slice_ends = time.monotonic() + settings.WARRANT["TIME_SLICE_SECONDS"]
    while True:
        # The cancel flag as the claim or the last checkpoint read it, under the run's row lock:
        # a cancel stops the run at the next step boundary.
        try:
            result = harness.step(
                run.state, run.snapshot, deps, run_id=str(run.id), cancel_requested=run.cancel_requested,
                deadline=run.deadline_at.timestamp() if run.deadline_at else None,
                decisions=_decisions(run) if _decisions_needed(run) else {},
            )
        except (DatabaseError, SoftTimeLimitExceeded):
            raise  # infrastructure, not the run: abandon the step; redelivery or the reconciler retries it
        except Exception as exc:  # a bug in a step ends the run failed, recorded, with its receipt
            logger.exception("run %s crashed in step %s", run.id, run.step)
            result = harness.StepResult(run.state, harness.Finish(RunStatus.FAILED, error="internal",
                                                                  message=f"{type(exc).__name__} in step {run.step}"))
        run = _checkpoint(run, worker, result)
        if run is None or run.status != RunStatus.RUNNING:
            return
        if time.monotonic() >= slice_ends:
            _release(run, worker)
            return


def _checkpoint(run: Run, worker: str, result: harness.StepResult) -> Run | None:
    """Write the step, its events and the new status in one transaction. None if we lost the lease."""
    state, outcome = result.state, result.outcome
    values = {
        "state": state, "step": run.step + 1, "deliveries": 0,
        "input_tokens": state["input_tokens"], "output_tokens": state["output_tokens"],
        "llm_calls": state["turns"], "tool_calls": state["tool_calls"],
        "tainted": state["tainted"], "taint_reason": "\n".join(state["taint_reasons"]),
        "lease_expires_at": timezone.now() + timedelta(seconds=settings.WARRANT["LEASE_SECONDS"]),
    }
    events = [(run.step, kind, data) for kind, data in result.events]
    finish = outcome if isinstance(outcome, harness.Finish) else None
    if finish is not None:  # the step that ends the run writes its end in the same statement
        check_transition(run.status, finish.status)
        now = timezone.now()
        values |= {"status": finish.status, "status_changed_at": now} | _finished(run, finish, now)
        events.append((run.step + 1, *_finished_event(finish)))
    with transaction.atomic():
        # Compare-and-set on (status, lease, step); the same statement takes the step's event
        # numbers and reads the cancel flag, both as of this write, under the row's lock.
        saved = _update_returning(run.id, where={"status": RunStatus.RUNNING, "lease_owner": worker, "step": run.step},
                                  values=values, add={"event_seq": len(events)},
                                  returning=("event_seq", "cancel_requested"))
        if saved is None:
            logger.warning("run %s: lease lost before step %s was saved; another worker has it", run.id, run.step)
            return None
        # No reload: the row is what this update wrote, plus the two columns other writers touch
        # while we hold the lease (a cancel, and its event), read back above.
        for name, value in values.items():
            setattr(run, name, value)
        run.event_seq, run.cancel_requested = saved[0], bool(saved[1])
        if events:
            _write_events(run, run.event_seq - len(events) + 1, events)
        if finish is not None:
            _after_finish(run, finish, now)
        elif isinstance(outcome, harness.Park):
            _park_or_finish(run, outcome)
    return run


def _set_status(run: Run, new: RunStatus, *, events: list[tuple[str, dict]] = (), **fields) -> None:
    """Move the run to `new` if its status is still the one we read, and append `events` (the
    same UPDATE takes their sequence numbers)."""
    check_transition(run.status, new)
    fields["status_changed_at"] = timezone.now()
    saved = _update_returning(run.id, where={"status": run.status}, values={"status": new, **fields},
                              add={"event_seq": len(events)}, returning=("event_seq",))
    if saved is None:
        raise Conflict(f"run {run.id} changed status concurrently")
    run.status = new
    for name, value in fields.items():
        setattr(run, name, value)
    (run.event_seq,) = saved
    if events:
        _write_events(run, run.event_seq - len(events) + 1, [(run.step, kind, data) for kind, data in events])


def _release(run: Run, worker: str) -> None:
    with transaction.atomic():
        _set_status(run, RunStatus.QUEUED, lease_owner="", lease_expires_at=None)
        _enqueue(run.id)


def _park_or_finish(run: Run, park: harness.Park) -> None:
    """Park the run for its approver. A run cancelled while its step ran does not go on to wait
    for one; nor does one whose approver role no longer exists (fail closed)."""
    if run.cancel_requested:
        _finish(run, harness.Finish(RunStatus.CANCELLED, message="cancelled while a step was running"))
        return
    role = Group.objects.filter(name=park.approver_role).first()
    if role is None:
        _finish(run, harness.Finish(RunStatus.FAILED, error=ErrorCode.POLICY_ERROR,
                                    message=f"the approver role {park.approver_role!r} does not exist"))
        return
    _park(run, park, role)


def _park(run: Run, park: harness.Park, role: Group) -> None:
    request = _approval_request(run, park, role)
    _set_status(run, RunStatus.AWAITING_APPROVAL, lease_owner="", lease_expires_at=None, events=[(
        "approval_requested", {"approval_id": str(request.id), "tool": park.tool, "arguments": park.arguments,
                               "arguments_sha256": park.arguments_sha256, "approver_role": role.name,
                               "policy": park.policy, "reasons": park.reasons,
                               # Where each argument came from, for the approver's card (runs.provenance).
                               "provenance": park.provenance})])


def _approval_request(run: Run, park: harness.Park, role: Group) -> ApprovalRequest:
    """The request for this call and these exact arguments: created, or the one already there."""
    ttl = park.ttl_seconds or settings.WARRANT["DEFAULT_APPROVAL_TTL_SECONDS"]
    key = {"run": run, "call_id": park.call_id, "arguments_sha256": park.arguments_sha256}
    try:
        # A call parks once (a decided one is not asked again), so try the insert first; the
        # unique (run, call, digest) finds a request that is already there.
        with transaction.atomic():
            request = ApprovalRequest.objects.create(
                **key, step=park.step, tool=park.tool, arguments=park.arguments,
                policy_id=park.policy["policy_id"] if park.policy else None,
                policy_version=park.policy["version"] if park.policy else None,
                policy_name=park.policy["policy"] if park.policy else "",
                approver_role=role, reasons=park.reasons, model_rationale=park.rationale,
                expires_at=timezone.now() + timedelta(seconds=ttl),
            )
    except IntegrityError:
        request = ApprovalRequest.objects.get(**key)
    return request


def _finished(run: Run, finish: harness.Finish, now) -> dict:
    """The columns a run's end writes, besides its status."""
    return {"output": finish.output, "stop_reason": finish.stop_reason, "error": finish.error,
            "error_message": finish.message, "finished_at": now, "lease_owner": "", "lease_expires_at": None,
            "started_at": run.started_at or now}


def _finished_event(finish: harness.Finish) -> tuple[str, dict]:
    return "run_finished", {"status": finish.status, "stop_reason": finish.stop_reason, "error": finish.error,
                            "message": finish.message}


def _finish(run: Run, finish: harness.Finish) -> None:
    now = timezone.now()
    _set_status(run, finish.status, events=[_finished_event(finish)], **_finished(run, finish, now))
    _after_finish(run, finish, now)


def _after_finish(run: Run, finish: harness.Finish, now) -> None:
    """In the transaction that ended the run: close its open requests and seal its receipt."""
    if run.state.get("parks", 1):  # a run that never parked has no approval requests
        ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).update(
            status=ApprovalRequest.Status.CANCELLED, decided_at=now, reason=f"run ended {finish.status}")
    receipt_seal(run=run)


# --- approvals and cancel ---------------------------------------------------------------


def _callers_recorded(run: Run) -> set[str]:
    """Who started the run as its snapshot and its first event (append-only, sealed into the
    receipt's trace) name them: a caller_id rewritten in the database does not make the caller
    a stranger to their own run."""
    names = {(run.snapshot or {}).get("caller", {}).get("username")}
    data = RunEvent.objects.filter(run_id=run.pk, kind="run_created").values_list("data", flat=True).first()
    if isinstance(data, dict) and isinstance(data.get("caller"), dict):
        names.add(data["caller"].get("username"))
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
    """Lock the run, then its approval request: the order every writer of both follows."""
    run_id = next(iter(ApprovalRequest.objects.filter(id=approval_id).order_by().values_list("run_id", flat=True)[:1]), None)
    if run_id is None:
        return None
    # A decision needs neither the run's frozen snapshot nor its state: both stay unread.
    run = Run.objects.select_for_update().defer("snapshot", "state").get(id=run_id)
    approval = ApprovalRequest.objects.select_for_update().select_related("approver_role").get(id=approval_id)
    approval.run = run
    return run, approval


DENIAL_NEEDS_A_REASON = "A denial needs a reason, so the requester knows why."


class InvalidDecision(DomainError):
    code = "invalid"


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


EXPIRED_REASON = "expired before a decision; counts as denied"


def _approval_close(run: Run, approval: ApprovalRequest, status: str, *, now, user, reason: str, via: str = "") -> None:
    approval.status, approval.decided_by, approval.decided_at, approval.reason = status, user, now, reason
    approval.decided_via = via
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason", "decided_via"])
    decided = ("approval_decided", {"approval_id": str(approval.id), "tool": approval.tool, "decision": status,
                                    "decided_by": user.get_username() if user else None, "reason": reason,
                                    "decided_via": via or None})
    if run.status == RunStatus.AWAITING_APPROVAL:
        # Time spent waiting for a human does not count against the run's own deadline. The
        # status change numbers the decision's event in the same statement.
        waited = now - approval.created_at
        _set_status(run, RunStatus.QUEUED, events=[decided],
                    deadline_at=(run.deadline_at + waited) if run.deadline_at else None)
        _enqueue(run.id)
    else:
        _event(run, *decided)


def approval_expire_due(*, run_id=None) -> int:
    """Close every pending request past its deadline (of one run, if given) as expired, and resume its run."""
    count = 0
    due = ApprovalRequest.objects.filter(status="pending", expires_at__lte=timezone.now())
    if run_id is not None:
        due = due.filter(run_id=run_id)
    for approval_id in due.values_list("id", flat=True):
        with transaction.atomic():
            locked = _lock_approval(approval_id)
            if locked is not None and locked[1].status == ApprovalRequest.Status.PENDING:
                _approval_close(*locked, ApprovalRequest.Status.EXPIRED, now=timezone.now(), user=None,
                                reason=EXPIRED_REASON)
                count += 1
    return count


def run_reconcile(*, queued_grace_seconds: int | None = None) -> dict:
    """Put lost work back on the queue, and expire overdue approval requests.

    A running run whose lease expired lost its worker; a run queued for longer than the grace
    period may have lost its message (a broker restart, a flush). Enqueueing either again is
    safe: the claim is compare-and-set, so a message for a run someone owns is a no-op.
    """
    now = timezone.now()
    if queued_grace_seconds is None:
        queued_grace_seconds = settings.WARRANT["QUEUED_GRACE_SECONDS"]
    expired = approval_expire_due()
    lost = list(Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now).values_list("id", flat=True))
    stale = list(Run.objects.filter(
        status=RunStatus.QUEUED, status_changed_at__lt=now - timedelta(seconds=queued_grace_seconds),
    ).values_list("id", flat=True))
    for run_id in lost + stale:
        _enqueue(run_id)
    # A witness sink that was down when runs sealed is brought up to the chain's head.
    caught_up = witness_catch_up()
    return {"expired_approvals": expired, "lost_leases": len(lost), "stale_queued": len(stale), "witness": caught_up}


def run_pick_up_if_lost(run: Run) -> bool:
    """The reconciler's work for one run, where no beat process does it (the embedded default):
    a running run whose lease expired (its step died) or a queued one past the grace period is
    enqueued again. True if it was."""
    now = timezone.now()
    grace = timedelta(seconds=settings.WARRANT["QUEUED_GRACE_SECONDS"])
    lost = ((run.status == RunStatus.RUNNING and run.lease_expires_at is not None and run.lease_expires_at < now
             and not _owner_alive(run.lease_owner))
            or (run.status == RunStatus.QUEUED and run.status_changed_at < now - grace))
    if lost:
        _enqueue(run.id)
    return lost


def _owner_alive(owner: str) -> bool:
    """Whether the process named host:pid (as the embedded worker names itself) still runs here:
    a step may outlast its lease when nothing bounds it (a slow model, long tools)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_cancel(*, run: Run, user) -> Run:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run.id)
        if run.status in TERMINAL:
            raise Conflict(f"the run already ended: {run.status}", details={"status": run.status})
        Run.objects.filter(id=run.id).update(cancel_requested=True)
        _event(run, "cancel_requested", {"by": user.get_username()})
        # A running run is owned by its worker: it stops at the next step boundary and seals the
        # receipt itself. A queued or parked one ends here.
        if run.status != RunStatus.RUNNING:
            _finish(run, harness.Finish(RunStatus.CANCELLED, message=f"cancelled by {user.get_username()}"))
    run.refresh_from_db()
    return run
