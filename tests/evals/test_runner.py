"""The runner on its own: the snapshot a case runs under, a wrong expectation's diff, the other
statuses, and the sandbox answering a side effect no policy holds back."""

import json

import pytest
from django.contrib.auth.models import Group, User

from agents.models import Agent, SentEmail
from agents.services import agent_publish
from evals.models import GoldenCase
from evals.runner import run_evals
from evals.snapshot import eval_snapshot
from governance.models import Policy
from runs.freeze import governance_for
from runs.models import Run, SideEffect
from tests import factories

pytestmark = pytest.mark.django_db

EMAIL = {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hello"}


@pytest.fixture(autouse=True)
def only_these_cases(demo):
    """The tests' own cases only (the demo's golden set, loaded with the demo, is tested on its own)."""
    GoldenCase.objects.all().delete()


def case(name: str, text: str, *, agent: str = "crm-assistant", roles=("operators",), **expected) -> GoldenCase:
    return GoldenCase.objects.create(agent=Agent.objects.get(slug=agent), name=name, input=text, roles=list(roles),
                                     **expected)


def result_of(eval_run, name: str):
    return eval_run.results.get(case_name=name)


def test_a_case_runs_under_the_snapshot_a_real_caller_in_its_roles_would_freeze(demo):
    operator = User.objects.get(username="operator")
    _, real = governance_for(agent_slug="crm-assistant", caller=operator)
    mine = eval_snapshot(agent_slug="crm-assistant", roles=["operators"], username="eval:x")
    assert mine["caller"] == {"username": "eval:x", "roles": ["operators"]}
    assert mine | {"caller": real["caller"]} == real
    # Other roles, other grants: a compliance caller is granted none of the CRM tools.
    assert eval_snapshot(agent_slug="crm-assistant", roles=["compliance"], username="eval:y")["granted_tools"] == []


def test_a_case_whose_expectations_are_wrong_fails_with_each_difference(demo):
    case("wrong", "What is Dana Whitfield's salary?", expected_status="succeeded", tools_called=["list_accounts"],
         output_contains=["Dana earns"], output_excludes=["HR"], policies_fired=["churn-risk-playbook"])
    case("right", "List all accounts.", expected_status="succeeded", tools_called=["list_accounts"])
    eval_run = run_evals(threshold=1.0)
    assert (eval_run.total, eval_run.passed, eval_run.pass_rate, eval_run.status) == (2, 1, 0.5, "failed")
    wrong = result_of(eval_run, "wrong")
    assert wrong.passed is False and wrong.status == "blocked"
    by = {f["expectation"]: f for f in wrong.failures}
    assert list(by) == ["status", "tools_called", "output_contains", "output_excludes", "policies_fired"]
    assert by["status"] | {} == {"expectation": "status", "expected": "succeeded", "actual": "blocked"}
    assert by["tools_called"]["actual"] == []
    assert by["output_contains"]["expected"] == "Dana earns" and "contact HR" in by["output_contains"]["actual"]
    assert by["policies_fired"]["actual"] == ["no-compensation-questions"]
    assert wrong.expected["status"] == "succeeded" and result_of(eval_run, "right").failures == []
    assert run_evals(threshold=0.5).status == "passed"


def test_parked_on_another_tool_and_a_tool_that_must_not_be_called(demo):
    case("parks", "Delete the account Initech.", expected_status="awaiting_approval", awaiting_tool="send_email",
         tools_not_called=["delete_account"])
    failures = result_of(run_evals(), "parks").failures
    assert failures == [
        {"expectation": "awaiting_tool", "expected": "send_email", "actual": "delete_account"},
        # Asked for counts: the call parked, it did not run, and it was still called.
        {"expectation": "tools_not_called", "expected": ["delete_account"], "actual": ["delete_account"]},
    ]


def test_stopped_with_its_reason_and_failed_with_its_error(replay_agent):
    factories.agent("replayer-short", tools=list(replay_agent.tools.all()), backend="replay", max_turns=1)
    two_turns = {"turns": [[{"name": "calculator", "arguments": {"expression": "1+1"}}],
                           [{"name": "calculator", "arguments": {"expression": "2+2"}}]]}
    case("turns", json.dumps(two_turns), agent="replayer-short", expected_status="stopped", stop_reason="max_turns")
    case("turns-wrong", json.dumps(two_turns), agent="replayer-short", expected_status="stopped",
         stop_reason="tool_budget")
    unknown = {"turns": [[{"name": "no_such_tool", "arguments": {}}], [{"name": "no_such_tool", "arguments": {}}]]}
    case("unusable", json.dumps(unknown), agent="replayer", expected_status="failed", error="invalid_output")
    eval_run = run_evals(threshold=0.0)
    assert result_of(eval_run, "turns").failures == []
    assert result_of(eval_run, "unusable").failures == []
    assert result_of(eval_run, "turns-wrong").failures == [
        {"expectation": "stop_reason", "expected": "tool_budget", "actual": "max_turns"}]
    assert run_evals(agent_slug="replayer").results.count() == 1  # only that agent's cases


def test_a_side_effect_no_policy_holds_back_goes_to_the_sandbox_not_the_tool(replay_agent):
    # No approval policy: the call would run in a real run (SentEmail, SideEffect); in an eval it is recorded.
    Policy.objects.filter(type="tool_approval").update(enabled=False)
    script = {"turns": [[{"name": "send_email", "arguments": EMAIL}]], "final": "sent"}
    case("email", json.dumps(script), agent="replayer", expected_status="succeeded", tools_called=["send_email"])
    result = result_of(run_evals(agent_slug="replayer"), "email")
    assert result.passed, result.failures
    assert result.sandbox == [{"tool": "send_email", "arguments": EMAIL | {"to": "[redacted:email]"},
                               "approval_id": None}]
    call = next(e for e in result.trace if e["kind"] == "tool_call")
    assert call["data"]["result"]["data"]["sandbox"] is True
    assert SentEmail.objects.count() == SideEffect.objects.count() == Run.objects.count() == 0


def test_disabled_cases_do_not_run_and_no_cases_is_no_pass(demo):
    case("off", "List all accounts.", expected_status="blocked", enabled=False)
    eval_run = run_evals(threshold=0.0)
    assert (eval_run.total, eval_run.status) == (0, "failed")


def test_any_profile_runs_the_cases(replay_agent):
    script = {"turns": [[{"name": "calculator", "arguments": {"expression": "6*7"}}]], "final": "replayed"}
    case("on-replay", json.dumps(script), expected_status="succeeded", tools_called=["calculator"],
         output_contains=["replayed", "42"])
    assert run_evals(agent_slug="crm-assistant").status == "failed"  # the agent's own scripted model answers otherwise
    eval_run = run_evals(agent_slug="crm-assistant", profile="replay")
    assert (eval_run.status, eval_run.profile) == ("passed", "replay")
    call = next(e for e in result_of(eval_run, "on-replay").trace if e["kind"] == "model_call")
    assert call["data"]["backend"] == "replay"


def test_a_case_of_an_agent_without_a_published_version_fails_saying_so(demo):
    factories.agent("never-published", publish=False)
    case("draft-only", "List all accounts.", agent="never-published", expected_status="succeeded")
    result = result_of(run_evals(agent_slug="never-published"), "draft-only")
    assert (result.passed, result.status) == (False, "no_snapshot")
    assert result.failures == [{"expectation": "status", "expected": "succeeded",
                                "actual": "agent 'never-published' is unknown or has no published version"}]


def test_a_case_that_runs_out_of_budget_stops_as_a_refused_extension_would(demo):
    """An agent with a budget role asks people for more; a case does not: it ends stopped."""
    agent = Agent.objects.get(slug="crm-assistant")
    agent.max_turns, agent.budget_role = 1, Group.objects.get(name="secops")
    agent.save()
    agent_publish(agent=agent)
    case("two turns", "How healthy is Acme Corp?", expected_status="stopped")
    eval_run = run_evals(threshold=1.0)
    result = result_of(eval_run, "two turns")
    assert result.passed, result.failures
    assert result.status == "stopped" and result.actual["stop_reason"] == "max_turns"
