"""Redelivery and replay: with on-commit tasks held back, the test plays the worker by hand."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connections, transaction
from django.utils import timezone

from agents.models import CrmAccount, SentEmail, Tool
from agents.tools import openapi
from agents.tools.envelopes import ToolContext
from runs import services
from runs.models import ApprovalRequest, Run, SideEffect
from runs.outbox import UnknownOutcome, delivery_note, idempotency_key, resend_safe, side_effect_execute
from tests.runs.helpers import parked

pytestmark = pytest.mark.django_db


def _approve(run: Run) -> None:
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=True)


def test_a_resume_delivered_twice_does_not_repeat_the_side_effect(demo):
    run, _ = parked()
    _approve(run)
    call = Run.objects.get(id=run.id).state["pending"][0]
    tool = run.snapshot["tools"]["delete_account"]
    # A first worker ran the side effect, then died before its checkpoint...
    first = side_effect_execute(run_id=str(run.id), caller="operator", tool=tool, call=call, approval_id=None)
    assert first["ok"] and not CrmAccount.objects.filter(account_id="A-300").exists()
    # ...and the redelivered message replays the step: the outbox answers, the tool does not run again.
    services.run_advance(run_id=run.id)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded"
    effect = SideEffect.objects.get(run=run)
    assert effect.attempts == 1 and effect.status == "done"
    delete_calls = [e for e in run.events.filter(kind="tool_call") if e.data["name"] == "delete_account"]
    assert len(delete_calls) == 1 and delete_calls[0].data["result"]["ok"] is True


def test_a_duplicate_message_for_a_finished_run_is_a_no_op(demo):
    run, _ = parked()
    _approve(run)
    services.run_advance(run_id=run.id)
    events_before = Run.objects.get(id=run.id).events.count()
    services.run_advance(run_id=run.id)
    assert Run.objects.get(id=run.id).events.count() == events_before


def test_a_resumed_call_whose_arguments_changed_is_not_executed_and_parks_again(demo):
    run, _ = parked()
    _approve(run)
    state = Run.objects.get(id=run.id).state
    state["pending"][0]["arguments"] = {"account_id": "A-100"}
    Run.objects.filter(id=run.id).update(state=state)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "awaiting_approval"
    assert SideEffect.objects.count() == 0
    assert CrmAccount.objects.filter(account_id__in=["A-100", "A-300"]).count() == 2
    requests = ApprovalRequest.objects.filter(run=run).order_by("created_at")
    assert [(r.status, r.arguments) for r in requests] == [
        ("approved", {"account_id": "A-300"}), ("pending", {"account_id": "A-100"})]


def test_a_run_that_is_cancelled_while_running_stops_at_the_next_step(demo):
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    Run.objects.filter(id=run.id).update(cancel_requested=True)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.llm_calls == 0
    assert hasattr(run, "receipt")


def test_a_step_that_keeps_dying_fails_the_run_after_the_delivery_limit(demo, settings):
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                caller=User.objects.get(username="operator"))
    Run.objects.filter(id=run.id).update(deliveries=settings.WARRANT["MAX_DELIVERIES"])
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", "internal")
    assert hasattr(run, "receipt")


# --- a worker that died between the call and its record ----------------------------------------

def keyed_delete(args: dict, ctx) -> dict:
    """A side effect that honours its idempotency key: a second send under a key finds the first."""
    SentEmail.objects.get_or_create(idempotency_key=ctx.idempotency_key,
                                    defaults={"to": "ops@example.com", "subject": "delete", "body": args["account_id"]})
    return {"account_id": args["account_id"], "deleted": True}


keyed_delete.honours_idempotency_key = True
OBSERVED: list[dict] = []


def observing_delete(args: dict, ctx) -> dict:
    """Records, while it runs, whether it is inside a transaction and what another connection sees."""
    seen = {}

    def look():
        seen.update(SideEffect.objects.filter(idempotency_key=ctx.idempotency_key).values("status", "claimed_by").first()
                    or {})
        connections.close_all()

    reader = threading.Thread(target=look)
    reader.start()
    reader.join()
    OBSERVED.append({"in_transaction": transaction.get_connection().in_atomic_block, **seen})
    return {"account_id": args["account_id"], "deleted": True}


def _died_mid_call(run: Run) -> tuple[dict, dict]:
    """The state a worker leaves when it dies after sending the approved call, before recording it."""
    call = Run.objects.get(id=run.id).state["pending"][0]
    key = idempotency_key(run_id=str(run.id), call=call)
    SideEffect.objects.create(idempotency_key=key, run=run, tool=call["name"], arguments=call["arguments"],
                              approval=ApprovalRequest.objects.get(run=run), status="executing", attempts=1,
                              claimed_by="dead-host:1", claim_expires_at=timezone.now() - timedelta(seconds=1))
    return call, {"key": key}


def test_a_call_whose_worker_died_mid_call_is_not_sent_again_to_a_tool_that_cannot_dedupe(demo):
    run, _ = parked()
    _approve(run)
    _, found = _died_mid_call(run)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    # delete_account cannot be told "at most once": it is not called again, and a person must look.
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    assert (run.status, run.error) == ("failed", "internal") and run.error_message.startswith("unknown_outcome")
    effect = SideEffect.objects.get(idempotency_key=found["key"])
    assert (effect.status, effect.attempts, effect.result["code"]) == ("unknown", 1, "unknown_outcome")
    [unknown] = run.events.filter(kind="side_effect_unknown")
    assert unknown.data["tool"] == "delete_account" and unknown.data["idempotency_key"] == found["key"]
    assert hasattr(run, "receipt")
    # A later delivery of the same step does not send it either.
    assert side_effect_execute_raises(run, found["key"])


def side_effect_execute_raises(run: Run, key: str) -> bool:
    effect = SideEffect.objects.get(idempotency_key=key)
    call = {"id": key.rsplit(":", 1)[1], "name": effect.tool, "arguments": effect.arguments}
    try:
        side_effect_execute(run_id=str(run.id), caller="operator", tool=run.snapshot["tools"][effect.tool], call=call,
                            approval_id=None, worker="another:2")
    except UnknownOutcome:
        return True
    return False


def test_a_call_whose_worker_died_mid_call_is_sent_again_under_its_key_to_a_tool_that_honours_it(demo):
    Tool.objects.filter(name="delete_account").update(handler=f"{__name__}.keyed_delete")
    run, _ = parked()
    _approve(run)
    call, found = _died_mid_call(run)
    # The first send reached the tool before the worker died.
    keyed_delete(call["arguments"], ToolContext(str(run.id), "operator", found["key"]))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded"
    effect = SideEffect.objects.get(idempotency_key=found["key"])
    assert (effect.status, effect.attempts, effect.claimed_by) == ("done", 2, "")
    assert SentEmail.objects.filter(idempotency_key=found["key"]).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_claim_is_committed_before_the_call_which_runs_outside_any_transaction(demo):
    Tool.objects.filter(name="delete_account").update(handler=f"{__name__}.observing_delete")
    OBSERVED.clear()
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                caller=User.objects.get(username="operator"))
    run.refresh_from_db()
    assert run.status == "awaiting_approval"
    _approve(run)  # the run resumes in-process once the decision commits
    run.refresh_from_db()
    assert run.status == "succeeded"
    [seen] = OBSERVED
    assert seen["in_transaction"] is False
    assert seen["status"] == "executing" and seen["claimed_by"]  # another connection saw the committed claim
    effect = SideEffect.objects.get(run=run)
    assert (effect.status, effect.attempts, effect.claimed_by, effect.claim_expires_at) == ("done", 1, "", None)


def test_which_tools_a_call_is_sent_again_to_after_a_lost_record(demo):
    """Sent again under its key only where the tool makes that one effect (runs.outbox.resend_safe)."""
    body = {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}
    keyed = {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}
    document = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {
        "/keyed": {"post": {"operationId": "keyed", "parameters": [keyed], "requestBody": body, "responses": {}}},
        "/plain": {"post": {"operationId": "plain", "requestBody": body, "responses": {}}},
        "/put/{id}": {"put": {"operationId": "put", "parameters": [{"name": "id", "in": "path"}], "responses": {}}},
    }}
    for operation in openapi.operations(document):
        Tool.objects.create(name=f"svc__{operation.name}", description="t", input_schema=operation.input_schema,
                            source=Tool.Source.OPENAPI, binding=operation.binding, side_effect=True)
    declared = Tool.objects.get(name="svc__keyed")
    # The declared header is Warrant's to fill with the call's key, not an argument the model gives.
    assert "Idempotency-Key" not in declared.input_schema["properties"] and declared.binding["idempotency_key"]
    Tool.objects.create(name="mcp_thing", description="t", source=Tool.Source.MCP, side_effect=True)
    Tool.objects.filter(name="list_accounts").update(handler=f"{__name__}.keyed_delete")
    verdicts = {name: resend_safe(name) for name in
                ("svc__keyed", "svc__plain", "svc__put", "mcp_thing", "delete_account", "list_accounts", "nothing")}
    assert verdicts == {"svc__keyed": True, "svc__plain": False, "svc__put": True, "mcp_thing": False,
                        "delete_account": False, "list_accounts": True, "nothing": False}
    assert "sent again under the same idempotency key" in delivery_note("svc__keyed")
    assert "unknown outcome" in delivery_note("svc__plain")
