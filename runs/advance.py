"""The worker loop: claim the run, take steps outside any transaction, checkpoint each step in one
short transaction, and stop when the run parks, ends or its time slice is used (then release it
to the queue). A duplicate message finds nothing to claim.

While the worker holds the run, a heartbeat renews its short lease (runs.lease), however long a
step takes. A process that is shutting down stops after the current step and releases the run
at once, so another worker takes it up without waiting for the lease to lapse.
"""

import logging
import time
import uuid
from functools import partial

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, transaction

from agents.breaker import DatabaseBreaker
from agents.model_calls import model_complete, profile_chain
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from core import stamp as governance_stamp
from core import telemetry
from governance import redaction
from governance.selectors import granted_tool_names
from runs import harness
from runs.lease import Heartbeat, shutting_down
from runs.lifecycle import run_checkpoint, run_claim, run_finish, run_release
from runs.models import ApprovalRequest, Run
from runs.outbox import UnknownOutcome, side_effect_execute
from runs.queue import enqueue
from runs.standing import standing_use
from runs.states import ErrorCode, RunStatus

logger = logging.getLogger(__name__)

# How long a step may go on from one fast model call to the next before it is checkpointed
# (runs.harness): what a redelivered step may repeat, and how late a cancel may be seen.
STEP_SECONDS = 1.0


def _deps(run: Run, worker: str) -> harness.Deps:
    snapshot = run.snapshot
    chain = profile_chain(snapshot["agent"]["model_profile"])
    caller = snapshot["caller"]["username"]
    read = {}  # the governance stamp the gate's live grant check read for the call about to run

    def granted_now() -> set[str]:
        read["stamp"] = governance_stamp.current()
        return granted_tool_names(role_names=snapshot["caller"]["roles"], stamp=read["stamp"])

    def execute(call: dict, *, side_effect: bool, approval_id: str | None) -> dict:
        tool = snapshot["tools"][call["name"]]
        # runs.tool_batch asks the gate (and so granted_now) for this very call just before; pop():
        # one reading never serves a second call, so a change is still seen by the very next call.
        stamp = read.pop("stamp", None)
        with telemetry.tool_span(call, tool, side_effect=side_effect, approval_id=approval_id) as span:
            if side_effect:
                return span.done(side_effect_execute(run_id=str(run.id), caller=caller, tool=tool, call=call,
                                                     approval_id=approval_id, worker=worker))
            return span.done(dispatch(tool=tool, arguments=call["arguments"], ctx=ToolContext(str(run.id), caller),
                                      stamp=stamp))

    def standing(call: dict, needed) -> str | None:
        found = standing_use(run=run, call=call, approver_role=needed.approver_role, policy=needed.policy)
        return str(found.pk) if found is not None else None

    return harness.Deps(
        # The process's breaker: a healthy profile's row is read once every few seconds, not before
        # every call or run (agents.breaker).
        complete=partial(model_complete, chain=chain, breaker=BREAKER),
        execute=execute,
        granted_now=granted_now,
        leaks=lambda arguments: redaction.leaks(arguments, secrets=redaction.env_secrets()),
        standing=standing,
    )


BREAKER = DatabaseBreaker()


def _decisions(run: Run) -> dict[str, dict]:
    """The decisions taken on the run's requests. Only a tool batch or a budget ask (runs.budget)
    consults them, and only a run that has parked can have any."""
    if not run.state["parks"] or not (run.state["pending"] or run.state.get("budget_ask")):
        return {}
    return {
        harness.decision_key(a.call_id, a.arguments_sha256): {"id": str(a.id), "status": a.status, "reason": a.reason}
        for a in ApprovalRequest.objects.filter(run=run).only("id", "call_id", "arguments_sha256", "status", "reason")
    }


def _go_on(beat: Heartbeat, seconds: float) -> bool:
    """Whether a step makes its next model call before its checkpoint: while it is young, and not
    when the process is going away or the lease was lost (runs.harness)."""
    return seconds < STEP_SECONDS and not beat.lost and not shutting_down()


def run_advance(*, run_id: str, worker: str | None = None, known: Run | None = None) -> None:
    """Advance the run for one time slice. `known`: the run as this process just wrote it (see
    runs.queue.enqueue)."""
    worker = worker or f"w-{uuid.uuid4().hex[:12]}"
    if shutting_down():
        if not settings.CELERY_TASK_ALWAYS_EAGER:  # in-process, the reconciler takes it up (no loop here)
            enqueue(run_id)  # not claimed: the message goes back for a worker that stays
        elif known is not None and known.status == RunStatus.RUNNING and known.lease_owner == worker:
            run_release(known, worker)  # claimed as it was queued (runs.queue.claimed_here): handed back
        return
    run = run_claim(run_id, worker, known=known)
    if run is None:
        return  # parked, finished, or owned by a live worker: a duplicate delivery is a no-op
    if run.deliveries > settings.WARRANT["MAX_DELIVERIES"]:
        with transaction.atomic():
            run_finish(run, harness.Finish(RunStatus.FAILED, error="internal",
                                           message=f"step {run.step} was attempted {run.deliveries} times without finishing"))
        return
    # A span of the slice when tracing (and the run's id and caller on its log lines).
    with Heartbeat(run.id, worker) as beat, telemetry.run_span(run) as span:
        _advance(run, worker, beat, span)


def _advance(run: Run, worker: str, beat: Heartbeat, span) -> None:
    deps = _deps(run, worker)
    slice_ends = time.monotonic() + settings.WARRANT["TIME_SLICE_SECONDS"]
    while True:
        # The cancel flag as the claim or the last checkpoint knew it: a cancel stops the run at
        # the next step boundary.
        try:
            result = harness.step(
                run.state, run.snapshot, deps, run_id=str(run.id), cancel_requested=run.cancel_requested,
                deadline=run.deadline_at.timestamp() if run.deadline_at else None, decisions=_decisions(run),
                go_on=partial(_go_on, beat),
            )
        except (DatabaseError, SoftTimeLimitExceeded):
            raise  # infrastructure, not the run: abandon the step; redelivery or the reconciler retries it
        except UnknownOutcome as exc:  # a side effect that may have happened: a person checks, nothing re-sends it
            logger.error("run %s: %s", run.id, exc)
            effect = exc.effect
            result = harness.StepResult(
                run.state, harness.Finish(RunStatus.FAILED, error=ErrorCode.INTERNAL, message=f"unknown_outcome: {exc}"),
                events=[("side_effect_unknown", {"tool": effect.tool, "idempotency_key": effect.idempotency_key,
                                                 "arguments": effect.arguments, "attempts": effect.attempts,
                                                 "approval_id": str(effect.approval_id) if effect.approval_id else None})])
        except Exception as exc:  # a bug in a step ends the run failed, recorded, with its receipt
            logger.exception("run %s crashed in step %s", run.id, run.step)
            result = harness.StepResult(run.state, harness.Finish(RunStatus.FAILED, error="internal",
                                                                  message=f"{type(exc).__name__} in step {run.step}"))
        run = run_checkpoint(run, worker, result)
        span.step(result, run)
        if run is None or run.status != RunStatus.RUNNING:
            return
        if beat.lost:
            return  # another worker holds the run now (the checkpoint above could not have matched)
        if shutting_down() or time.monotonic() >= slice_ends:
            run_release(run, worker)
            return
