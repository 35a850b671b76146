"""The orchestrator's workflows. The only writers of Run.status, each transition in one place.

A task calls run_advance: claim the run (compare-and-set plus a lease), take steps outside any
transaction, checkpoint each step in one short transaction, and stop when the run parks, ends
or its time slice is used (then re-enqueue). A duplicate message finds nothing to claim.
"""

import hashlib
import logging
import time
import uuid
from functools import partial
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.model_calls import model_complete, profile_chain
from agents.models import Agent
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from governance.api_errors import Conflict, DomainError, Forbidden, NotFound, Unprocessable
from governance import redaction
from governance.selectors import granted_tool_names
from runs import harness
from runs.freeze import governance_for
from runs.models import ApprovalRequest, Run, RunEvent
from runs.outbox import side_effect_execute
from runs.receipts import receipt_seal
from runs.states import TERMINAL, ErrorCode, RunStatus, check_transition

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
        run = Run.objects.create(
            agent=agent, agent_version=version, caller=caller, caller_roles=snapshot["caller"]["roles"],
            idempotency_key=idempotency_key or None, request_sha256=digest, input=input_text,
            snapshot=snapshot, policy_snapshot_sha256=snapshot["policy_snapshot_sha256"],
            state=harness.initial_state(input_text),
        )
        _event(run, "run_created", {"agent": agent.slug, "agent_version": snapshot["agent"]["version"],
                                    "caller": snapshot["caller"], "policy_snapshot_sha256": run.policy_snapshot_sha256},
               seq=1)  # the run was inserted just now: nothing else has written its trace
        _enqueue(run.id)
    return run


def _enqueue(run_id) -> None:
    # Only after commit: a worker must never pick up a run whose row it cannot see yet.
    # With a real broker a failed publish is logged, not raised: the change it follows is
    # committed, and the reconciler re-enqueues a queued run whose message never arrived.
    transaction.on_commit(partial(_publish, str(run_id)), robust=not settings.CELERY_TASK_ALWAYS_EAGER)


def _publish(run_id: str) -> None:
    from runs.tasks import run_advance_task

    try:
        run_advance_task.apply_async((run_id,), retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2})
    except Exception:
        if settings.CELERY_TASK_ALWAYS_EAGER:
            raise
        logger.exception("could not enqueue run %s; the reconciler will", run_id)


def _event(run: Run, kind: str, data: dict, *, step: int | None = None, seq: int | None = None) -> RunEvent:
    """Append to the run's trace. Callers hold the run's row lock (every writer of a run takes it)."""
    if seq is None:
        seq = (RunEvent.objects.filter(run=run).order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    # The trace is written redacted (secrets, card numbers, emails as configured): the run's own
    # state keeps what it needs to resume, the receipt keeps digests.
    data = redaction.redact(data, kinds=settings.WARRANT["REDACT"], secrets=redaction.env_secrets())
    return RunEvent.objects.create(run=run, seq=seq, step=run.step if step is None else step, kind=kind, data=data)


# --- advance ----------------------------------------------------------------------------


def _claim(run_id, worker: str) -> bool:
    """queued -> running, or take over a running run whose lease expired. True if we own it."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.WARRANT["LEASE_SECONDS"])
    claimable = Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    with transaction.atomic():
        changed = Run.objects.filter(claimable, id=run_id).update(
            status=RunStatus.RUNNING, status_changed_at=now, lease_owner=worker, lease_expires_at=lease,
            deliveries=F("deliveries") + 1,
        )
        if changed == 1:
            # Written under the row lock the UPDATE took: every event writer holds it, so the
            # per-run sequence numbers cannot collide.
            run = Run.objects.only("id", "step", "deliveries").get(id=run_id)
            _event(run, "claimed", {"worker": worker, "delivery": run.deliveries})
    return changed == 1


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


def run_advance(*, run_id: str, worker: str | None = None) -> None:
    worker = worker or f"w-{uuid.uuid4().hex[:12]}"
    if not _claim(run_id, worker):
        return  # parked, finished, or owned by a live worker: a duplicate delivery is a no-op
    run = Run.objects.select_related("caller").get(id=run_id)
    if run.deliveries > settings.WARRANT["MAX_DELIVERIES"]:
        with transaction.atomic():
            _finish(run, harness.Finish(RunStatus.FAILED, error="internal",
                                        message=f"step {run.step} was attempted {run.deliveries} times without finishing"))
        return
    if run.started_at is None:
        now = timezone.now()
        run.started_at, run.deadline_at = now, now + timedelta(seconds=run.snapshot["agent"]["deadline_seconds"])
        Run.objects.filter(id=run.id).update(started_at=run.started_at, deadline_at=run.deadline_at)
    deps = _deps(run)
    slice_ends = time.monotonic() + settings.WARRANT["TIME_SLICE_SECONDS"]
    while True:
        cancel = Run.objects.filter(id=run.id).values_list("cancel_requested", flat=True).first()
        try:
            result = harness.step(
                run.state, run.snapshot, deps, run_id=str(run.id), cancel_requested=bool(cancel),
                deadline=run.deadline_at.timestamp() if run.deadline_at else None,
                decisions=_decisions(run) if run.state["pending"] else {},  # only tool calls consult them
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


_RELOADED = [f.attname for f in Run._meta.concrete_fields if f.attname not in ("id", "snapshot", "state", "input")]


def _checkpoint(run: Run, worker: str, result: harness.StepResult) -> Run | None:
    """Write the step, its events and the new status in one transaction. None if we lost the lease."""
    state = result.state
    with transaction.atomic():
        changed = Run.objects.filter(id=run.id, status=RunStatus.RUNNING, lease_owner=worker, step=run.step).update(
            state=state, step=run.step + 1, deliveries=0,
            input_tokens=state["input_tokens"], output_tokens=state["output_tokens"],
            llm_calls=state["turns"], tool_calls=state["tool_calls"],
            tainted=state["tainted"], taint_reason="\n".join(state["taint_reasons"]),
            lease_expires_at=timezone.now() + timedelta(seconds=settings.WARRANT["LEASE_SECONDS"]),
        )
        if changed != 1:
            logger.warning("run %s: lease lost before step %s was saved; another worker has it", run.id, run.step)
            return None
        # The frozen snapshot and the input never change, and the state is the one just written:
        # reload the rest only (the snapshot is most of the row).
        run.refresh_from_db(fields=_RELOADED)
        run.state = state
        for kind, data in result.events:
            _event(run, kind, data, step=run.step - 1)
        outcome = result.outcome
        if isinstance(outcome, harness.Park):
            outcome = _park_or_finish(run, outcome)
        if isinstance(outcome, harness.Park):
            _park(run, outcome)
        elif isinstance(outcome, harness.Finish):
            _finish(run, outcome)
    return run


def _set_status(run: Run, new: RunStatus, **fields) -> None:
    check_transition(run.status, new)
    fields["status_changed_at"] = timezone.now()
    updated = Run.objects.filter(id=run.id, status=run.status).update(status=new, **fields)
    if updated != 1:
        raise Conflict(f"run {run.id} changed status concurrently")
    run.status = new
    for name, value in fields.items():
        setattr(run, name, value)


def _release(run: Run, worker: str) -> None:
    with transaction.atomic():
        _set_status(run, RunStatus.QUEUED, lease_owner="", lease_expires_at=None)
        _enqueue(run.id)


def _park_or_finish(run: Run, park: harness.Park) -> harness.Park | harness.Finish:
    """A run cancelled while its step ran does not go on to wait for an approver; nor does one
    whose approver role no longer exists (fail closed)."""
    if run.cancel_requested:
        return harness.Finish(RunStatus.CANCELLED, message="cancelled while a step was running")
    if not Group.objects.filter(name=park.approver_role).exists():
        return harness.Finish(RunStatus.FAILED, error=ErrorCode.POLICY_ERROR,
                              message=f"the approver role {park.approver_role!r} does not exist")
    return park


def _park(run: Run, park: harness.Park) -> None:
    role = Group.objects.get(name=park.approver_role)
    ttl = park.ttl_seconds or settings.WARRANT["DEFAULT_APPROVAL_TTL_SECONDS"]
    request, created = ApprovalRequest.objects.get_or_create(
        run=run, call_id=park.call_id, arguments_sha256=park.arguments_sha256,
        defaults={
            "step": park.step, "tool": park.tool, "arguments": park.arguments,
            "policy_id": park.policy["policy_id"] if park.policy else None,
            "policy_version": park.policy["version"] if park.policy else None,
            "policy_name": park.policy["policy"] if park.policy else "",
            "approver_role": role, "reasons": park.reasons, "model_rationale": park.rationale,
            "expires_at": timezone.now() + timedelta(seconds=ttl),
        },
    )
    _set_status(run, RunStatus.AWAITING_APPROVAL, lease_owner="", lease_expires_at=None)
    _event(run, "approval_requested", {"approval_id": str(request.id), "tool": park.tool, "arguments": park.arguments,
                                       "arguments_sha256": park.arguments_sha256, "approver_role": role.name,
                                       "policy": park.policy, "reasons": park.reasons})


def _finish(run: Run, finish: harness.Finish) -> None:
    now = timezone.now()
    _set_status(run, finish.status, output=finish.output, stop_reason=finish.stop_reason, error=finish.error,
                error_message=finish.message, finished_at=now, lease_owner="", lease_expires_at=None,
                started_at=run.started_at or now)
    ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).update(
        status=ApprovalRequest.Status.CANCELLED, decided_at=now, reason=f"run ended {finish.status}")
    _event(run, "run_finished", {"status": finish.status, "stop_reason": finish.stop_reason, "error": finish.error,
                                 "message": finish.message})
    receipt_seal(run=run)


# --- approvals and cancel ---------------------------------------------------------------


def check_approval_decide(*, approval: ApprovalRequest, user) -> None:
    """Raise unless `user` may decide `approval` now. Separation of duties binds superusers too."""
    if not user.groups.filter(pk=approval.approver_role_id).exists():
        raise Forbidden(f"only members of {approval.approver_role.name!r} may decide this request")
    if approval.run.caller_id == user.pk:
        raise Forbidden("no one approves their own run")
    if approval.status != ApprovalRequest.Status.PENDING:
        raise Conflict(f"this request was already decided: {approval.status}", details={"status": approval.status})


def _lock_approval(approval_id) -> tuple[Run, ApprovalRequest] | None:
    """Lock the run, then its approval request: the order every writer of both follows."""
    run_id = ApprovalRequest.objects.filter(id=approval_id).values_list("run_id", flat=True).first()
    if run_id is None:
        return None
    run = Run.objects.select_for_update().get(id=run_id)
    approval = ApprovalRequest.objects.select_for_update().select_related("run", "approver_role").get(id=approval_id)
    return run, approval


def approval_decide(*, approval_id, user, approve: bool, reason: str = "") -> ApprovalRequest:
    with transaction.atomic():
        locked = _lock_approval(approval_id)
        if locked is None:
            raise NotFound("no such approval request")
        run, approval = locked
        check_approval_decide(approval=approval, user=user)
        now = timezone.now()
        expired = approval.expires_at <= now
        if expired:
            # Close it as expired (committed), and tell the approver their decision came too late.
            _approval_close(run, approval, ApprovalRequest.Status.EXPIRED, now=now, user=None, reason=EXPIRED_REASON)
        else:
            status = ApprovalRequest.Status.APPROVED if approve else ApprovalRequest.Status.DENIED
            _approval_close(run, approval, status, now=now, user=user, reason=reason)
    if expired:
        raise Conflict("this request expired before a decision; it counts as denied", details={"status": "expired"})
    return approval


EXPIRED_REASON = "expired before a decision; counts as denied"


def _approval_close(run: Run, approval: ApprovalRequest, status: str, *, now, user, reason: str) -> None:
    approval.status, approval.decided_by, approval.decided_at, approval.reason = status, user, now, reason
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason"])
    _event(run, "approval_decided", {"approval_id": str(approval.id), "tool": approval.tool, "decision": status,
                                     "decided_by": user.get_username() if user else None, "reason": reason})
    if run.status == RunStatus.AWAITING_APPROVAL:
        # Time spent waiting for a human does not count against the run's own deadline.
        waited = now - approval.created_at
        _set_status(run, RunStatus.QUEUED, deadline_at=(run.deadline_at + waited) if run.deadline_at else None)
        _enqueue(run.id)


def approval_expire_due() -> int:
    """Close every pending request past its deadline as expired, and resume its run."""
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
    return {"expired_approvals": expired, "lost_leases": len(lost), "stale_queued": len(stale)}


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
