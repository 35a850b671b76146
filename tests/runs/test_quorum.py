"""Quorum: a tool approval policy asks N distinct approvers of its role; one denial denies; the
call runs once, when the N-th approval lands, with exactly the approved arguments."""

import json

import pytest
from django.contrib.auth.models import User

from agents.models import CrmAccount
from core.api_errors import Conflict, Forbidden
from governance import services as governance_services
from governance.models import Policy
from runs import services
from runs.approvals import approval_decide
from runs.models import ApprovalDecision, Receipt
from runs.verification import receipt_verify_chain
from tests import factories
from tests.runs.helpers import events, parked, tools_called

pytestmark = pytest.mark.django_db

DELETE = "Delete the account Initech."


@pytest.fixture
def two_of_secops(demo):
    """The demo's secops policy asks two approvers; secops has three members."""
    factories.approver("approver2")
    factories.approver("approver3")
    policy = Policy.objects.get(name="side-effects-need-secops")
    governance_services.policy_update(policy=policy, values={"quorum": 2})
    return {name: User.objects.get(username=name) for name in ("approver", "approver2", "approver3")}


def test_the_call_runs_once_when_the_second_approval_lands(two_of_secops, django_capture_on_commit_callbacks):
    run, approval = parked()
    assert (approval.quorum, approval.approvals_count) == (2, 0)
    with django_capture_on_commit_callbacks(execute=True):
        decided = approval_decide(approval_id=approval.id, user=two_of_secops["approver"], approve=True,
                                  reason="checked the ticket", via="session")
    assert (decided.status, decided.approvals_count) == ("pending", 1)
    run.refresh_from_db()
    assert run.status == "awaiting_approval" and "delete_account" not in tools_called(run.id)
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    [recorded] = events(run.id, "approval_recorded")
    assert (recorded["decided_by"], recorded["approvals"], recorded["quorum"]) == ("approver", 1, 2)

    with django_capture_on_commit_callbacks(execute=True):
        decided = approval_decide(approval_id=approval.id, user=two_of_secops["approver2"], approve=True,
                                  via="token:abc123")
    assert (decided.status, decided.approvals_count, decided.decided_by.username) == ("approved", 2, "approver2")
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert tools_called(run.id).count("delete_account") == 1
    assert not CrmAccount.objects.filter(account_id="A-300").exists()
    [closed] = events(run.id, "approval_decided")
    assert closed["approved_by"] == ["approver", "approver2"] and closed["quorum"] == 2

    # Each decision is on record, and sealed: who, the role, how they signed in, why.
    rows = list(ApprovalDecision.objects.filter(approval=approval).values_list("username", "role", "decision", "via",
                                                                               "reason"))
    assert rows == [("approver", "secops", "approved", "session", "checked the ticket"),
                    ("approver2", "secops", "approved", "token:abc123", "")]
    [sealed] = json.loads(Receipt.objects.get(run=run).body)["approvals"]
    assert sealed["quorum"] == 2 and sealed["decision"] == "approved"
    assert [(d["by"], d["role"], d["via"]) for d in sealed["decisions"]] == [
        ("approver", "secops", "session"), ("approver2", "secops", "token:abc123")]
    assert receipt_verify_chain().valid


def test_one_denial_denies_whatever_approvals_came_before(two_of_secops, django_capture_on_commit_callbacks):
    run, approval = parked()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=two_of_secops["approver"], approve=True, via="session")
        decided = approval_decide(approval_id=approval.id, user=two_of_secops["approver2"], approve=False,
                                  reason="not on the offboarding list", via="session")
    assert decided.status == "denied" and decided.decided_by.username == "approver2"
    run.refresh_from_db()
    assert run.status == "succeeded" and "delete_account" not in tools_called(run.id)
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    [call] = [e for e in events(run.id, "tool_call") if e["name"] == "delete_account"]
    assert call["result"]["code"] == "denied" and call["result"]["details"]["reason"] == "not on the offboarding list"
    # A third approver comes too late: the request is closed.
    with pytest.raises(Conflict) as refused:
        approval_decide(approval_id=approval.id, user=two_of_secops["approver3"], approve=True, via="session")
    assert "already decided" in str(refused.value.message)


def test_a_person_decides_once_so_an_approver_cannot_approve_twice_or_then_deny(two_of_secops, approver):
    _, approval = parked()
    first = approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    assert first.status_code == 200 and first.json()["approvals_count"] == 1 and first.json()["status"] == "pending"
    again = approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["details"]["yours"] == "approved"
    deny = approver.post(f"/api/v1/approvals/{approval.id}/deny/", {"reason": "changed my mind"}, format="json")
    assert deny.status_code == 409 and "already approved" in deny.json()["error"]["message"]
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_count) == ("pending", 1)
    assert ApprovalDecision.objects.filter(approval=approval).count() == 1


def test_the_caller_is_no_approver_even_in_the_role(two_of_secops, django_capture_on_commit_callbacks):
    # The caller joins secops: they still cannot be one of the two.
    operator = User.objects.get(username="operator")
    operator.groups.add(factories.role("secops"))
    _, approval = parked()
    with pytest.raises(Forbidden) as refused:
        approval_decide(approval_id=approval.id, user=operator, approve=True, via="session")
    assert "no one approves their own run" in refused.value.message
    assert ApprovalDecision.objects.filter(approval=approval).count() == 0


def test_the_quorum_is_frozen_with_the_run(two_of_secops, django_capture_on_commit_callbacks):
    # A run started while the policy asked for two keeps asking for two after it is edited to three.
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=DELETE, caller=User.objects.get(username="operator"))
    governance_services.policy_update(policy=Policy.objects.get(name="side-effects-need-secops"), values={"quorum": 3})
    services.run_advance(run_id=run.id)
    assert run.approvals.get().quorum == 2


def test_the_api_and_the_queue_show_who_approved_so_far(two_of_secops, approver, compliance, client):
    _, approval = parked()
    approver.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "looks right"}, format="json")
    body = compliance.get(f"/api/v1/approvals/{approval.id}/").json()
    assert (body["quorum"], body["approvals_count"], body["status"]) == (2, 1, "pending")
    assert [(d["user"], d["decision"], d["via"], d["reason"]) for d in body["decisions"]] == [
        ("approver", "approved", "forced", "looks right")]  # the test client forces authentication
    client.force_login(two_of_secops["approver2"])
    page = client.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert "1 of 2" in page and "by approver" in page
    client.force_login(two_of_secops["approver"])
    page = client.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert "you already approved this request" in page


@pytest.mark.parametrize(("values", "message"), [
    ({"quorum": 0}, "quorum"),
    ({"escalate_to_role": "compliance"}, "escalation needs both"),
    ({"escalate_after_seconds": 60}, "escalation needs both"),
    ({"escalate_to_role": "compliance", "escalate_after_seconds": 3600, "approval_ttl_seconds": 600},
     "must be less than the request's TTL"),
    ({"quorum": 5}, "fewer than the quorum of 5"),
])
def test_policies_refuse_a_quorum_or_escalation_that_cannot_work(demo, admin, values, message):
    policy = Policy.objects.get(name="side-effects-need-secops")
    response = admin.patch(f"/api/v1/policies/{policy.pk}/", values, format="json")
    assert response.status_code == 400, response.content
    assert message in json.dumps(response.json())
    policy.refresh_from_db()
    assert (policy.quorum, policy.escalate_to_role_id, policy.version) == (1, None, 1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_evidence_bundle_carries_each_decision_and_verifies_offline(two_of_secops, tmp_path):
    from tests.evidence.test_bundle_export import export, verify

    run, approval = parked()
    approval_decide(approval_id=approval.id, user=two_of_secops["approver"], approve=True, reason="one", via="session")
    approval_decide(approval_id=approval.id, user=two_of_secops["approver2"], approve=True, reason="two", via="session")
    services.run_advance(run_id=run.id)
    bundle = export(tmp_path / "bundle")
    [row] = [json.loads(line) for line in (bundle / "approvals.jsonl").read_text().splitlines()
             if json.loads(line)["id"] == str(approval.id)]
    assert row["quorum"] == 2 and [d["by"] for d in row["decisions"]] == ["approver", "approver2"]
    result = verify(bundle)
    assert result.returncode == 0, result.stdout + result.stderr
    # A decision dropped from the file in transit is caught (the manifest covers every file).
    lines = (bundle / "approvals.jsonl").read_text().splitlines()
    edited = [json.dumps(json.loads(line) | {"decisions": json.loads(line)["decisions"][:1]})
              if json.loads(line)["id"] == str(approval.id) else line for line in lines]
    (bundle / "approvals.jsonl").write_text("\n".join(edited) + "\n")
    tampered = verify(bundle)
    assert tampered.returncode != 0 and "approvals.jsonl" in tampered.stdout


def test_the_policy_lab_says_how_many_approve(two_of_secops, admin):
    body = admin.post("/api/v1/policies/evaluate/", {"agent": "crm-assistant", "input": DELETE}, format="json").json()
    [tool] = [t for t in body["tools"] if t["name"] == "delete_account"]
    assert (tool["approval"]["approver_role"], tool["approval"]["quorum"], tool["approval"]["escalate_to_role"]) == (
        "secops", 2, None)
