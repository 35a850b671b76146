"""The dry run (POST policies/evaluate/): which guard, playbooks, formatter and tool approvals an input would
meet, for an agent and a role, without starting anything."""

import pytest

from governance import services
from governance.models import Policy
from runs.models import Run
from tests.api.policies import evaluate

pytestmark = pytest.mark.django_db


def tool(result: dict, name: str) -> dict:
    return next(t for t in result["tools"] if t["name"] == name)


def test_a_salary_question_is_blocked_by_the_intent_guard(admin):
    response = evaluate(admin, agent="crm-assistant", input="What is Dana Whitfield's salary?")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["blocked"] is True
    guard = result["intent_guard"]
    assert (guard["policy"], guard["version"], guard["matched"]) == ("no-compensation-questions", 1, ["salary"])
    assert guard["response"].startswith("I can't help with salary")
    assert result["agent"] == {"slug": "crm-assistant", "version": 1}


def test_deleting_an_account_shows_the_tool_and_needs_secops(admin):
    result = evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="operators").json()
    assert result["blocked"] is False and result["intent_guard"] is None
    assert result["role"] == "operators"
    delete = tool(result, "delete_account")
    assert delete["needs_approval"] is True and delete["side_effect"] is True
    assert delete["approval"]["approver_role"] == "secops"
    assert delete["approval"]["policy"] == "side-effects-need-secops"
    assert delete["approval"]["matched"] == ["delete_account"]
    assert tool(result, "list_accounts")["needs_approval"] is False
    email = tool(result, "send_email")
    assert [g["policy"] for g in email["guides"]] == ["email-etiquette"]
    assert "Customer Success" in email["guides"][0]["content"]
    assert len(result["tools"]) == 9


def test_a_role_without_grants_is_shown_no_tools(admin):
    result = evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="compliance").json()
    assert result["tools"] == []


def test_a_churn_question_fires_the_churn_playbook(admin):
    result = evaluate(admin, agent="crm-assistant", input="Which accounts are most at risk of churning?",
                      role="operators").json()
    assert result["blocked"] is False
    [playbook] = result["playbooks"]
    assert playbook["policy"] == "churn-risk-playbook"
    assert set(playbook["matched"]) == {"churning", "at risk"}
    assert "`list_accounts`" in playbook["content"]
    assert result["output_formatter"] is None  # the executive summary is disabled


def test_an_enabled_output_formatter_is_reported(admin):
    # Through the service, below the gate: over the API the golden set refuses it (list-accounts
    # must not read "Executive summary", tests/governance/test_drafts.py); this is about the dry run.
    services.policy_update(policy=Policy.objects.get(name="executive-summary"), values={"enabled": True})
    result = evaluate(admin, agent="crm-assistant", input="List all accounts.").json()
    assert result["output_formatter"]["policy"] == "executive-summary"
    assert result["output_formatter"]["version"] == 2


def test_without_an_agent_or_role_it_still_answers(admin):
    result = evaluate(admin, input="What is Dana Whitfield's salary?").json()
    assert result["agent"] is None and result["role"] is None
    assert result["intent_guard"]["policy"] == "no-compensation-questions"


@pytest.mark.parametrize("body, field", [
    ({"agent": "nope", "input": "hi"}, "agent"),
    ({"agent": "crm-assistant", "input": "hi", "role": "ghosts"}, "role"),
    ({"agent": "crm-assistant"}, "input"),
    ({"input": "hi", "dry": True}, "dry"),
])
def test_evaluate_refuses_unknown_agents_roles_and_fields(admin, body, field):
    response = admin.post("/api/v1/policies/evaluate/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_a_broken_policy_is_a_422_naming_it(admin):
    Policy.objects.filter(name="churn-risk-playbook").update(regex="(unclosed")  # bypasses the services' checks
    response = evaluate(admin, agent="crm-assistant", input="List all accounts.")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "policy_error"
    assert error["details"]["policy"] == "churn-risk-playbook"
    assert "churn-risk-playbook" in error["message"]


def test_the_dry_run_starts_nothing(admin):
    evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="operators")
    assert Run.objects.count() == 0


def test_the_dry_run_says_which_calls_a_run_would_refuse(admin):
    """An input that activates a skill limits the run to the skill's tools: the dry run names each
    tool the gate would refuse and why, as the harness would answer the call."""
    body = admin.post("/api/v1/policies/evaluate/", {"agent": "crm-assistant", "input": "Summarise Globex's tickets."},
                      format="json").json()
    tools = {tool["name"]: tool for tool in body["tools"]}
    assert tools["list_open_tickets"]["refused"] is None
    assert tools["send_email"]["refused"] == {
        "code": "not_permitted", "reason": "'send_email' is outside the active skill's allowed tools"}
    assert tools["send_email"]["needs_approval"] is False
