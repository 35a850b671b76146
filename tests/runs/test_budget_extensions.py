"""Budget extensions, per-tool caps and the pre-call token check through real runs in the embedded
default (no broker: runs execute in-process), the demo's crm-assistant and the scripted model."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from runs.approvals import approval_expire_due
from runs.models import ApprovalRequest, Receipt, Run
from tests.runs.helpers import events, republish, start

pytestmark = pytest.mark.django_db(transaction=True)

HEALTH = "How healthy is Acme Corp?"


def _budget_request(run_id) -> ApprovalRequest:
    return ApprovalRequest.objects.get(run_id=run_id, kind="budget", status="pending")


def _run(client, run_id) -> dict:
    return client.get(f"/api/v1/runs/{run_id}/").json()


def test_a_run_out_of_tokens_waits_for_its_budget_role_and_goes_on_when_approved(operator, approver):
    republish(max_tokens=500, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    assert run["status"] == "awaiting_budget" and run["usage"]["input_tokens"] == 0  # refused before the call
    request = _budget_request(run["id"])
    assert request.call_id == "budget:token_budget:1" and request.tool == "" and request.approver_role.name == "secops"
    assert request.budget["kind"] == "token_budget" and request.budget["limit"] == 500
    assert request.budget["asked"] == request.budget["estimated"] - 500
    pending = run["pending_approval"]
    assert (pending["id"], pending["kind"], pending["budget"], pending["tool"]) == (str(request.id), "budget",
                                                                                    request.budget, "")
    [asked] = events(run["id"], "budget_requested")
    assert asked["approval_id"] == str(request.id) and asked["budget"] == request.budget
    listed = approver.get("/api/v1/approvals/", {"status": "pending"}).json()["results"]
    assert [(a["id"], a["kind"], a["budget"]) for a in listed] == [(str(request.id), "budget", request.budget)]
    asks, granted = 0, 500
    while run["status"] == "awaiting_budget":
        request = _budget_request(run["id"])
        asks, granted = asks + 1, granted + request.budget["asked"]
        response = approver.post(f"/api/v1/approvals/{request.id}/approve/", {"reason": "quarter end"}, format="json")
        assert response.status_code == 200, response.content
        run = _run(operator, run["id"])
    assert run["status"] == "succeeded" and asks >= 1
    spent = run["usage"]["input_tokens"] + run["usage"]["output_tokens"]
    assert spent <= granted  # every call was paid for before it was made
    assert len(events(run["id"], "budget_extended")) == asks
    approvals = operator.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]["approvals"]
    assert len(approvals) == asks and {a["decision"] for a in approvals} == {"approved"}


def test_a_denied_extension_stops_the_run_with_its_stop_reason(operator, approver):
    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    assert run["status"] == "awaiting_budget"
    request = _budget_request(run["id"])
    assert request.budget == {"kind": "max_turns", "used": 1, "limit": 1, "asked": 1}
    assert approver.post(f"/api/v1/approvals/{request.id}/deny/", {}, format="json").status_code == 400  # a reason
    response = approver.post(f"/api/v1/approvals/{request.id}/deny/", {"reason": "enough for today"}, format="json")
    assert response.status_code == 200, response.content
    run = _run(operator, run["id"])
    assert (run["status"], run["stop_reason"]) == ("stopped", "max_turns")
    [refused] = events(run["id"], "budget_refused")
    assert (refused["decision"], refused["reason"]) == ("denied", "enough for today")
    assert Receipt.objects.get(run_id=run["id"]).body


def test_an_expired_extension_stops_the_run_as_a_denial_does(operator):
    republish(max_tool_calls=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    assert run["status"] == "awaiting_budget"
    request = _budget_request(run["id"])
    assert request.budget["kind"] == "tool_budget"
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_expire_due() == 1
    run = _run(operator, run["id"])
    assert (run["status"], run["stop_reason"]) == ("stopped", "tool_budget")
    assert ApprovalRequest.objects.get(id=request.id).status == "expired"
    assert events(run["id"], "budget_refused")[0]["decision"] == "expired"


def test_no_one_extends_their_own_runs_budget(operator, approver):
    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    User.objects.get(username="operator").groups.add(Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    request = _budget_request(run["id"])
    response = operator.post(f"/api/v1/approvals/{request.id}/approve/", {}, format="json")
    assert response.status_code == 403 and "own run" in response.json()["error"]["message"]
    assert _run(operator, run["id"])["status"] == "awaiting_budget"


def test_without_a_budget_role_the_pre_call_check_stops_the_run_before_spending(operator):
    republish(max_tokens=500)
    run = start(operator, HEALTH)
    assert (run["status"], run["stop_reason"]) == ("stopped", "token_budget")
    assert run["usage"]["input_tokens"] + run["usage"]["output_tokens"] == 0
    [refused] = events(run["id"], "model_call_refused")
    assert refused["tokens_left"] == 500 and refused["estimated_tokens"] > 500
    assert not ApprovalRequest.objects.filter(run_id=run["id"]).exists()


def test_a_tools_cap_refuses_the_call_over_it(operator):
    republish(tool_caps={"get_account": 1})
    run = start(operator, "How healthy are Acme Corp and Globex?")  # two get_account lookups, uncapped
    assert run["status"] == "succeeded"
    ran = [e["name"] for e in events(run["id"], "tool_call") if e["result"]["ok"]]
    assert ran.count("get_account") == 1
    refused = events(run["id"], "tool_refused")
    assert [(r["tool"], r["code"]) for r in refused] == [("get_account", "tool_cap")]
    assert Run.objects.get(id=run["id"]).snapshot["agent"]["tool_caps"] == {"get_account": 1}


def test_a_run_waiting_for_budget_can_be_cancelled_and_its_request_closes(operator):
    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    request = _budget_request(run["id"])
    response = operator.post(f"/api/v1/runs/{run['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    request.refresh_from_db()
    assert request.status == "cancelled"


def test_a_run_extended_verifies_with_its_budget_decisions_in_the_receipt(operator, approver, compliance):
    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    while run["status"] == "awaiting_budget":
        approver.post(f"/api/v1/approvals/{_budget_request(run['id']).id}/approve/", {}, format="json")
        run = _run(operator, run["id"])
    assert run["status"] == "succeeded"
    receipt = compliance.get(f"/api/v1/receipts/{run['receipt_id']}/").json()
    assert {a["decided_by"] for a in receipt["body"]["approvals"]} == {"approver"}
    verified = compliance.get(f"/api/v1/receipts/{run['receipt_id']}/verify/").json()
    assert verified["valid"] is True, verified


def test_the_workbench_queue_shows_a_budget_request_and_decides_it(operator):
    from django.test import Client

    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, HEALTH)
    request = _budget_request(run["id"])
    client = Client()
    client.force_login(User.objects.get(username="approver"))
    queue = client.get("/admin/runs/approvalrequest/queue/")
    assert queue.status_code == 200 and str(request.id) in queue.content.decode()
    assert "max_turns: used 1 of 1, asks 1 more" in queue.content.decode()  # what ran out, on the card
    decided = client.post(f"/admin/runs/approvalrequest/{request.id}/decide/",
                          {"decision": "deny", "reason": "not today"}, follow=True)
    assert decided.status_code == 200
    assert (_run(operator, run["id"])["status"], _run(operator, run["id"])["stop_reason"]) == ("stopped", "max_turns")
