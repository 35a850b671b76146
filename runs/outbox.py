"""Exactly-once side effects: a call is recorded under its idempotency key before it runs.

A redelivered step finds the key already done and returns the stored result instead of acting
again. For tools that write to our own database the action and the outbox row commit together;
tools that reach other systems receive the key and must honour it (send_email does).
"""

from django.db import transaction
from django.utils import timezone

from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext, error
from runs.models import SideEffect


def idempotency_key(*, run_id: str, call: dict) -> str:
    return f"run:{run_id}:call:{call['id']}"


def side_effect_execute(*, run_id: str, caller: str, tool: dict, call: dict, approval_id: str | None) -> dict:
    key = idempotency_key(run_id=run_id, call=call)
    with transaction.atomic():
        effect, _ = SideEffect.objects.select_for_update().get_or_create(
            idempotency_key=key,
            defaults={"run_id": run_id, "tool": call["name"], "arguments": call["arguments"], "approval_id": approval_id},
        )
        if effect.arguments != call["arguments"] or effect.tool != call["name"]:
            # The key names one call; other arguments under it are not a replay but a different act.
            return error("idempotency_conflict", f"{key} was already used for another {effect.tool} call")
        if effect.status != SideEffect.Status.PENDING:
            return effect.result
        effect.attempts += 1
        envelope = dispatch(tool=tool, arguments=call["arguments"], ctx=ToolContext(run_id, caller, key))
        effect.status = SideEffect.Status.DONE if envelope["ok"] else SideEffect.Status.FAILED
        effect.result = envelope
        effect.completed_at = timezone.now()
        effect.save(update_fields=["attempts", "status", "result", "completed_at"])
    return envelope
