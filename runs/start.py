"""Starting a run: its governance frozen, its row and first event written, handed to a worker."""

from django.db import transaction
from django.utils import timezone

from core.api_errors import Conflict, DomainError
from runs import harness
from runs.events import chain_rows, insert_rows, tip
from runs.freeze import governance_for
from runs.models import Run
from runs.approvals import remember_first_event
from runs.lifecycle import run_claim_new
from runs.queue import claimed_here, enqueue

MAX_INPUT_CHARS = 20_000


class InvalidRunRequest(DomainError):
    code = "invalid"


def run_start(*, agent_slug: str, input_text: str, caller, governance_stamp: str | None = None,
              origin: dict | None = None) -> tuple[Run, bool]:
    """Create a queued run with its governance frozen, and enqueue it: (run, True).

    `governance_stamp`: the stamp read when the run was asked for (the API reads it with the
    caller's permission); by default it is read here. Retries are the API's concern
    (runs.idempotency): every call starts a run, and the second value, kept for the callers of the
    time when run_start answered a retried key itself, is always True.

    `origin`: where a run nobody typed came from (triggers: the trigger, schedule or delivery, the
    payload's digest, whether it is untrusted), kept in the snapshot and the first event, so the
    receipt binds it; an untrusted origin taints the run from its start (governance.taint).
    """
    if not isinstance(input_text, str) or not input_text.strip():
        raise InvalidRunRequest("input is required", details={"input": ["This field is required."]})
    if len(input_text) > MAX_INPUT_CHARS:
        raise InvalidRunRequest(f"input is longer than {MAX_INPUT_CHARS} characters", details={"input": ["too long"]})
    # When the governance below held, in the signed trace: the offline approval check dates each run's
    # view of its tools by it (warrant_verify.approvals). A kept freeze holds now too: its stamp is current.
    frozen_at = timezone.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
    governance, snapshot = governance_for(agent_slug=agent_slug, caller=caller, stamp=governance_stamp)
    if governance is None:
        raise InvalidRunRequest(f"there is no agent {agent_slug!r}", details={"agent": [f"unknown agent {agent_slug!r}"]})
    if snapshot is None:
        raise Conflict(f"agent {agent_slug!r} has no published version", details={"agent": agent_slug})
    if origin is not None:
        snapshot["origin"] = origin
    worker = claimed_here()  # asked before the transaction begins: whether its commit is the real one
    with transaction.atomic():
        run = Run(
            agent=governance.agent, agent_version=governance.version, caller=caller,
            caller_roles=snapshot["caller"]["roles"], input=input_text, snapshot=snapshot,
            policy_snapshot_sha256=snapshot["policy_snapshot_sha256"], state=harness.initial_state(input_text),
            event_seq=1,
        )
        events = [(0, "run_created", {
            "agent": governance.agent.slug, "agent_version": snapshot["agent"]["version"], "caller": snapshot["caller"],
            "policy_snapshot_sha256": run.policy_snapshot_sha256, "frozen_at": frozen_at}
            | ({"origin": origin} if origin is not None else {}))]
        if worker:  # in-process: born claimed by the worker that advances it after the commit
            events.append(run_claim_new(run, worker))
        # The first events are chained before the row is inserted, so the row carries its tip
        # (Run.trace_tip): the claim that follows appends to the trace without reading it.
        rows, head = chain_rows(run, 1, events)
        run.event_seq, run.trace_tip = head[0], tip(head)
        run.save(force_insert=True)
        insert_rows(run, rows, head)
        # Its names kept for the approval checks (an id whose insert rolls back is never asked about).
        remember_first_event(run.id, events[0][2])
        # The embedded worker claims the run as written here, without reading it back.
        enqueue(run.id, known=run)
    return run, True
