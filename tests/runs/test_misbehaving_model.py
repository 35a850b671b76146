"""A model that repeats itself or races its owner still cannot get more than was approved."""

import json

import pytest
from django.contrib.auth.models import Group, User

from agents.models import SentEmail, Tool
from agents.services import agent_publish
from governance.models import ToolGrant
from runs import services
from runs.models import ApprovalRequest, Run, SideEffect
from tests.runs.helpers import run_script

pytestmark = pytest.mark.django_db

EMAIL = {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hello"}


def _decide(run: Run, approve: bool) -> None:
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=approve,
                             reason="" if approve else "not this one")
    services.run_advance(run_id=run.id)
    run.refresh_from_db()


def test_two_identical_calls_in_one_turn_need_two_approvals(replay_agent):
    run = run_script({"turns": [[{"name": "send_email", "arguments": EMAIL}, {"name": "send_email", "arguments": EMAIL}]]})
    assert run.status == "awaiting_approval"
    _decide(run, approve=True)
    assert run.status == "awaiting_approval", "the second identical call waits for its own decision"
    assert SentEmail.objects.count() == 1
    _decide(run, approve=False)
    assert run.status == "succeeded"
    assert SentEmail.objects.count() == 1
    assert [a.status for a in ApprovalRequest.objects.filter(run=run).order_by("created_at")] == ["approved", "denied"]
    assert SideEffect.objects.filter(run=run).count() == 1


def test_a_model_that_reuses_call_ids_still_gets_each_approved_email_sent_once(replay_agent):
    other = dict(EMAIL, subject="Second")
    run = run_script({"turns": [[{"name": "send_email", "arguments": EMAIL}], [{"name": "send_email", "arguments": other}]]})
    _decide(run, approve=True)
    _decide(run, approve=True)
    assert run.status == "succeeded"
    assert sorted(SentEmail.objects.values_list("subject", flat=True)) == ["Renewal", "Second"]


def test_a_cancel_that_arrives_during_a_batch_does_not_leave_the_run_waiting_for_an_approver(replay_agent):
    tool = Tool.objects.create(name="slow_lookup", description="Looks something up.", input_schema={"type": "object"},
                               handler="tests.runs.backends.cancel_own_run")
    ToolGrant.objects.create(role=Group.objects.get(name="operators"), tool=tool)
    replay_agent.tools.add(tool)
    agent_publish(agent=replay_agent)
    run = run_script({"turns": [[{"name": "slow_lookup", "arguments": {}}, {"name": "send_email", "arguments": EMAIL}]]})
    assert run.status == "cancelled"
    assert not ApprovalRequest.objects.filter(run=run, status="pending").exists()
    assert hasattr(run, "receipt") and SentEmail.objects.count() == 0


def test_an_approver_role_that_disappeared_fails_the_run_closed(replay_agent):
    run, _ = services.run_start(agent_slug="replayer", caller=User.objects.get(username="operator"),
                                input_text=json.dumps({"turns": [[{"name": "send_email", "arguments": EMAIL}]]}))
    Group.objects.filter(name="secops").update(name="secops-renamed")
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", "policy_error")
    assert "secops" in run.error_message and hasattr(run, "receipt")
    assert SentEmail.objects.count() == 0
