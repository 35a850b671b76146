"""Redelivery and replay: with on-commit tasks held back, the test plays the worker by hand."""

import pytest
from django.contrib.auth.models import User

from agents.models import CrmAccount
from runs import services
from runs.models import ApprovalRequest, Run, SideEffect
from runs.outbox import side_effect_execute

pytestmark = pytest.mark.django_db


def _parked_delete(demo) -> Run:
    # In a non-transactional test the on-commit enqueue never fires: nothing runs until we say so.
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "awaiting_approval"
    return run


def _approve(run: Run) -> None:
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=True)


def test_a_resume_delivered_twice_does_not_repeat_the_side_effect(demo):
    run = _parked_delete(demo)
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
    run = _parked_delete(demo)
    _approve(run)
    services.run_advance(run_id=run.id)
    events_before = Run.objects.get(id=run.id).events.count()
    services.run_advance(run_id=run.id)
    assert Run.objects.get(id=run.id).events.count() == events_before


def test_a_resumed_call_whose_arguments_changed_is_not_executed_and_parks_again(demo):
    run = _parked_delete(demo)
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
