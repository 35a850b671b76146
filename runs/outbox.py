"""Exactly-once side effects, with no transaction held across the call.

1. Claim, in one short transaction: the call is recorded under its idempotency key as
   `executing`, by this worker, until a claim that the run's heartbeat renews (runs.lease).
   Committed before anything is sent.
2. Call the tool outside any transaction, with the key: a slow or hanging tool server holds no
   row lock and no database transaction, however long it takes.
3. Record the result in a second short transaction (`done` or `failed`).

A redelivered step finds the key done and returns the stored result instead of acting again. A
step that finds the key `executing` under a claim that lapsed knows the worker before it died
between 2 and 3: whether the call reached the tool is unknown. The call is then sent again only
to a tool that can be told to act at most once, under the same key: a Python tool whose function
says it honours ToolContext.idempotency_key (send_email does), an OpenAPI operation that declares
an Idempotency-Key header or whose method is idempotent (PUT, DELETE). Any other tool (MCP, an
OpenAPI POST or PATCH, a Python tool that says nothing) is never sent blindly a second time: the
effect ends `unknown`, the trace records it, and the run fails for a person to check the target
system (see docs/operations.md, "Durability").
"""

import logging
import time
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from agents.models import Tool
from agents.tools.allowed import python_path_allowed
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext, error
from runs.lease import lease_seconds
from runs.models import SideEffect

logger = logging.getLogger(__name__)
IDEMPOTENT_METHODS = frozenset({"PUT", "DELETE"})


class UnknownOutcome(Exception):
    """The side effect may or may not have happened, and sending it again could repeat it."""

    def __init__(self, effect: SideEffect):
        self.effect = effect
        super().__init__(f"the outcome of {effect.tool} ({effect.idempotency_key}) is unknown: the worker executing "
                         f"it stopped before recording a result, and {effect.tool} cannot be told to act at most once; "
                         "it was not sent again. Check the target system.")


def idempotency_key(*, run_id: str, call: dict) -> str:
    return f"run:{run_id}:call:{call['id']}"


def side_effect_execute(*, run_id: str, caller: str, tool: dict, call: dict, approval_id: str | None,
                        worker: str = "") -> dict:
    """Execute the side-effecting call once. Raises UnknownOutcome (see the module's docstring)."""
    key = idempotency_key(run_id=run_id, call=call)
    while True:
        outcome = _claim(key, run_id=run_id, call=call, approval_id=approval_id, worker=worker)
        if isinstance(outcome, dict):
            return outcome  # done before, or a conflict
        if outcome is not None:
            break
        # Another worker's claim has not lapsed: it is executing the call now, or died moments
        # ago. Wait for it to record the result, or for its claim to lapse (its heartbeat stopped).
        time.sleep(min(1.0, lease_seconds() / 5))
    envelope = dispatch(tool=tool, arguments=call["arguments"], ctx=ToolContext(run_id, caller, key))
    _record(outcome, envelope, worker)
    return envelope


def _claim(key: str, *, run_id: str, call: dict, approval_id: str | None, worker: str):
    """The effect, claimed for `worker` (the call is to be sent); a result to return instead;
    or None while another worker's live claim holds it."""
    now = timezone.now()
    claim = {"status": SideEffect.Status.EXECUTING, "claimed_by": worker,
             "claim_expires_at": now + timedelta(seconds=lease_seconds())}
    with transaction.atomic():
        effect, created = SideEffect.objects.select_for_update().get_or_create(
            idempotency_key=key,
            defaults={"run_id": run_id, "tool": call["name"], "arguments": call["arguments"], "approval_id": approval_id,
                      "attempts": 1, **claim},
        )
        if created:
            return effect
        if effect.arguments != call["arguments"] or effect.tool != call["name"]:
            # The key names one call; other arguments under it are not a replay but a different act.
            return error("idempotency_conflict", f"{key} was already used for another {effect.tool} call")
        if effect.status in (SideEffect.Status.DONE, SideEffect.Status.FAILED):
            return effect.result
        if effect.status == SideEffect.Status.EXECUTING:
            # Our own name on it is an attempt of this process that ended without a record (the
            # step was abandoned): as lapsed as another's. A live claim of another worker: wait.
            if effect.claimed_by != worker and effect.claim_expires_at and effect.claim_expires_at > now:
                return None
            if not resend_safe(call["name"]):
                _write(effect, status=SideEffect.Status.UNKNOWN, claimed_by="", claim_expires_at=None, completed_at=now,
                       result=error("unknown_outcome", UnknownOutcome(effect).args[0]))
                logger.error("side effect %s: outcome unknown, not sent again", key)
            else:
                logger.warning("side effect %s: the worker %s stopped during the call; sent again under the same key",
                               key, effect.claimed_by)
        if effect.status != SideEffect.Status.UNKNOWN:
            _write(effect, attempts=effect.attempts + 1, **claim)  # pending (an older row), or sent again
    if effect.status == SideEffect.Status.UNKNOWN:
        raise UnknownOutcome(effect)  # after the commit: the verdict is kept
    return effect


def _record(effect: SideEffect, envelope: dict, worker: str) -> None:
    """The result, written only while the claim is still this worker's."""
    with transaction.atomic():
        recorded = SideEffect.objects.filter(id=effect.id, status=SideEffect.Status.EXECUTING, claimed_by=worker).update(
            status=SideEffect.Status.DONE if envelope["ok"] else SideEffect.Status.FAILED, result=envelope,
            completed_at=timezone.now(), claimed_by="", claim_expires_at=None)
    if not recorded:
        logger.error("side effect %s: its claim was taken over while the call ran; the result %s is not recorded",
                     effect.idempotency_key, "ok" if envelope["ok"] else envelope.get("code"))


def _write(effect: SideEffect, **fields) -> None:
    for name, value in fields.items():
        setattr(effect, name, value)
    effect.save(update_fields=list(fields))


def resend_safe(tool_name: str) -> bool:
    """Whether the tool can be told to act at most once: sending it the same key again cannot
    repeat the effect. What the approver's card and docs/tool-sources.md say, per tool."""
    row = Tool.objects.filter(name=tool_name).values("source", "handler", "binding", "tool_source_id").first()
    if row is None:
        return False
    if row["source"] == Tool.Source.OPENAPI:
        binding = row["binding"] or {}
        return bool(binding.get("idempotency_key")) or str(binding.get("method", "")).upper() in IDEMPOTENT_METHODS
    if row["source"] == Tool.Source.PYTHON and row["handler"]:
        if row["tool_source_id"] is not None and not python_path_allowed(row["handler"]):
            return False  # importing runs the module's code: only what the dispatcher itself would import
        try:
            return bool(getattr(import_string(row["handler"]), "honours_idempotency_key", False))
        except ImportError:
            return False
    return False  # MCP: the protocol has no idempotency key


def delivery_note(tool_name: str) -> str:
    """What the approver's card says happens to an approved side effect if a worker dies mid-call."""
    if resend_safe(tool_name):
        return (f"Runs once. If the worker running it dies before recording the result, it is sent again under the "
                f"same idempotency key, which {tool_name} honours: it still acts once.")
    return (f"Runs once. If the worker running it dies after sending it and before recording the result, Warrant does "
            f"not send it again ({tool_name} cannot be told to act at most once): the run ends failed with "
            f"“unknown outcome”, and someone must check in the target system whether it happened.")
