"""The demo through the API, end to end on the embedded default (eager Celery, scripted model)."""

import pytest

from agents.models import CrmAccount, SentEmail
from runs.models import ApprovalRequest, Receipt, Run, SideEffect
from tests.runs.helpers import events, start, tools_called

pytestmark = pytest.mark.django_db(transaction=True)


def test_acme_health_follows_the_skill_and_reports_score_and_label(operator):
    run = start(operator, "How healthy is Acme Corp?")
    assert run["status"] == "succeeded", run
    assert "100" in run["output"] and "healthy" in run["output"]
    assert tools_called(run["id"]) == ["get_account", "get_usage_trend", "list_open_tickets", "compute_health_score"]
    assert [e["skill"] for e in events(run["id"], "skill_activated")] == ["account-health-review"]
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert body["skills_used"][0]["name"] == "account-health-review"
    # The scripted model's counts are estimates, and both the run and its receipt say so.
    assert run["usage"]["tokens_estimated"] is True and {c["tokens_estimated"] for c in body["model_calls"]} == {True}
    assert [c["name"] for c in body["tool_calls"]] == tools_called(run["id"])


def test_churn_question_ranks_every_account_worst_first(operator):
    run = start(operator, "Which accounts are most at risk of churning?")
    assert run["status"] == "succeeded", run
    output = run["output"]
    positions = [output.index(name) for name in ("Globex", "Umbrella", "Initech", "Acme")]
    assert positions == sorted(positions), output
    assert "46" in output and "at risk" in output
    assert tools_called(run["id"]).count("compute_health_score") == 4


def test_salary_question_is_blocked_before_any_model_call(operator):
    run = start(operator, "What is Dana Whitfield's salary?")
    assert run["status"] == "blocked"
    assert "HR" in run["output"]
    assert run["usage"]["llm_calls"] == 0
    decision = events(run["id"], "policy_decision")[0]
    assert decision["policy"] == "no-compensation-questions" and decision["matched"] == ["salary"]
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert body["status"] == "blocked" and body["model_calls"] == []
    assert body["policies_fired"][0]["type"] == "intent_guard"


@pytest.mark.parametrize("text, expected", [
    ("List all accounts.", ["Acme Corp", "Globex", "Initech", "Umbrella"]),
    ("Summarise the open tickets for Globex.", ["T-2", "API outage in EU region"]),
    ("What is the usage trend for Umbrella?", ["Umbrella"]),
    ("What is 10% of Acme's ARR?", ["24000"]),
    ("What does our knowledge base say about renewals?", ["[kb-"]),
])
def test_the_other_demo_questions_are_answered(operator, text, expected):
    run = start(operator, text)
    assert run["status"] == "succeeded", run
    for fragment in expected:
        assert fragment in run["output"], run["output"]


def test_globex_tickets_put_p1_first(operator):
    output = start(operator, "Summarise the open tickets for Globex.")["output"]
    assert output.index("T-2") < output.index("T-3") < output.index("T-4")


def test_delete_parks_then_secops_approves_and_it_runs_exactly_once(operator, approver):
    run = start(operator, "Delete the account Initech.")
    assert run["status"] == "awaiting_approval", run
    pending = run["pending_approval"]
    assert pending["tool"] == "delete_account" and pending["arguments"] == {"account_id": "A-300"}
    assert pending["approver_role"] == "secops"
    assert CrmAccount.objects.filter(account_id="A-300").exists()

    queue = approver.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [a["id"] for a in queue] == [pending["id"]]
    decided = approver.post(f"/api/v1/approvals/{pending['id']}/approve/", {"reason": "customer asked"}, format="json")
    assert decided.status_code == 200, decided.content
    assert decided.json()["status"] == "approved" and decided.json()["decided_by"] == "approver"

    run = operator.get(f"/api/v1/runs/{run['id']}/").json()
    assert run["status"] == "succeeded", run
    assert not CrmAccount.objects.filter(account_id="A-300").exists()
    assert SideEffect.objects.filter(run_id=run["id"], tool="delete_account", status="done").count() == 1
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert body["approvals"][0]["decision"] == "approved" and body["approvals"][0]["decided_by"] == "approver"
    assert any(c["name"] == "delete_account" and c["ok"] and c["approval_id"] == pending["id"] for c in body["tool_calls"])


def test_a_tool_guide_the_model_was_shown_is_in_the_trace_once_and_in_the_receipt(operator, approver):
    run = start(operator, "Send an email to dana.whitfield@example.com about the Acme renewal.")
    approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/approve/", {}, format="json")
    run = operator.get(f"/api/v1/runs/{run['id']}/").json()
    assert run["status"] == "succeeded" and run["usage"]["llm_calls"] >= 2  # the guide was shown on every call
    shown = [e for e in events(run["id"], "policy_decision") if e["effect"] == "guidance shown"]
    assert [(e["policy"], e["matched"]) for e in shown] == [("email-etiquette", ["send_email"])]
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert "tool_guide" in [p["type"] for p in body["policies_fired"]]


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "   "}])
def test_a_denial_without_a_reason_decides_nothing(operator, approver, body):
    run = start(operator, "Send an email to dana.whitfield@example.com about the Acme renewal.")
    approval_id = run["pending_approval"]["id"]
    response = approver.post(f"/api/v1/approvals/{approval_id}/deny/", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"reason": ["A denial needs a reason, so the requester knows why."]}
    assert ApprovalRequest.objects.get(id=approval_id).status == "pending"
    assert events(run["id"], "approval_decided") == []
    # The rule is the service's, so the workbench and every other caller meet it too.
    from django.contrib.auth.models import User

    from core.api_errors import DomainError
    from runs.services import approval_decide

    with pytest.raises(DomainError, match="needs a reason"):
        approval_decide(via="session", approval_id=approval_id, user=User.objects.get(username="approver"), approve=False, reason=" ")
    assert ApprovalRequest.objects.get(id=approval_id).status == "pending"
    # Approving needs none; the schema says which body each takes.
    assert approver.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json").status_code == 200
    schemas = approver.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    assert schemas["ApprovalDenialInputRequest"]["required"] == ["reason"]
    assert "reason" not in schemas["ApprovalDecisionInputRequest"].get("required", [])


def test_send_email_denied_sends_nothing_and_the_answer_says_so(operator, approver):
    run = start(operator, "Send an email to dana.whitfield@example.com about the Acme renewal.")
    assert run["status"] == "awaiting_approval", run
    pending = run["pending_approval"]
    assert pending["tool"] == "send_email" and pending["arguments"]["to"] == "dana.whitfield@example.com"
    response = approver.post(f"/api/v1/approvals/{pending['id']}/deny/", {"reason": "not now"}, format="json")
    assert response.status_code == 200
    run = operator.get(f"/api/v1/runs/{run['id']}/").json()
    assert run["status"] == "succeeded"
    assert "denied" in run["output"] and "nothing was sent" in run["output"]
    assert SentEmail.objects.count() == 0
    assert SideEffect.objects.count() == 0


def test_the_caller_cannot_approve_their_own_run(operator, demo):
    from django.contrib.auth.models import Group, User

    User.objects.get(username="operator").groups.add(Group.objects.get(name="secops"))
    run = start(operator, "Delete the account Initech.")
    response = operator.post(f"/api/v1/approvals/{run['pending_approval']['id']}/approve/", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "no one approves their own run"
    assert ApprovalRequest.objects.get(id=run["pending_approval"]["id"]).status == "pending"
    assert CrmAccount.objects.filter(account_id="A-300").exists()


def test_a_second_decision_is_a_conflict(operator, approver):
    run = start(operator, "Delete the account Initech.")
    approval_id = run["pending_approval"]["id"]
    assert approver.post(f"/api/v1/approvals/{approval_id}/deny/", {"reason": "not now"}, format="json").status_code == 200
    second = approver.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json")
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "conflict"
    assert ApprovalRequest.objects.get(id=approval_id).status == "denied"
    assert CrmAccount.objects.filter(account_id="A-300").exists()


def test_only_members_of_the_approver_role_can_decide(operator, compliance, outsider):
    run = start(operator, "Delete the account Initech.")
    approval_id = run["pending_approval"]["id"]
    assert outsider.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json").status_code == 404
    assert compliance.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json").status_code == 403
    assert ApprovalRequest.objects.get(id=approval_id).status == "pending"


def test_every_run_ends_with_one_receipt_and_the_chain_verifies(operator, compliance, approver):
    for text in ("List all accounts.", "What is Dana Whitfield's salary?", "How healthy is Acme Corp?"):
        start(operator, text)
    assert Receipt.objects.count() == Run.objects.count() == 3
    receipts = compliance.get("/api/v1/receipts/").json()["results"]
    assert [r["seq"] for r in receipts] == [1, 2, 3]
    assert receipts[1]["prev_hash"] == receipts[0]["hash"]
    for receipt in receipts:
        verdict = compliance.get(f"/api/v1/receipts/{receipt['id']}/verify/").json()
        assert verdict["valid"] is True, verdict


def test_an_enabled_output_formatter_reshapes_the_answer(operator):
    from governance.models import Policy
    from governance.services import policy_update

    policy_update(policy=Policy.objects.get(name="executive-summary"), values={"enabled": True})
    run = start(operator, "List all accounts.")
    assert run["output"].startswith("Executive summary\n\n") and "Acme Corp" in run["output"]
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert {"id": Policy.objects.get(name="executive-summary").id, "version": 2, "type": "output_formatter"} in body[
        "policies_fired"]


def test_the_churn_playbook_joins_the_context_and_the_receipt(operator):
    run = start(operator, "Which accounts are most at risk of churning?")
    decisions = events(run["id"], "policy_decision")
    assert [(d["policy"], d["matched"]) for d in decisions] == [("churn-risk-playbook", ["churning", "at risk"])]
    body = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]
    assert [p["type"] for p in body["policies_fired"]] == ["playbook"]
