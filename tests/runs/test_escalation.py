"""Escalation: a request not decided in time moves to the policy's escalation role (the first role
loses it), recorded as an event and in the receipt; expiry still counts as a denial. The clock is
the reconciler's `now`, moved by the test: no sleeps."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from agents.models import CrmAccount
from core.api_errors import Conflict, Forbidden
from governance import services as governance_services
from governance.models import Policy
from runs import services
from runs.approvals import approval_decide
from runs.models import ApprovalRequest, Receipt
from runs.verification import receipt_verify_chain
from tests import factories
from tests.runs.helpers import events, parked, tools_called

pytestmark = pytest.mark.django_db

DELETE = "Delete the account Initech."
LEADS = "secops-leads"


@pytest.fixture
def leads(demo):
    """secops has ten minutes, then the request goes to secops-leads; it expires after an hour."""
    people = {"lead1": factories.approver("lead1", roles=(LEADS,)), "lead2": factories.approver("lead2", roles=(LEADS,)),
              "approver2": factories.approver("approver2")}
    governance_services.policy_update(policy=Policy.objects.get(name="side-effects-need-secops"), values={
        "escalate_to_role": LEADS, "escalate_after_seconds": 600, "approval_ttl_seconds": 3600})
    return people | {"approver": User.objects.get(username="approver")}


def test_a_request_not_decided_in_time_moves_to_the_escalation_role(leads, django_capture_on_commit_callbacks):
    run, approval = parked()
    assert approval.escalate_to_role.name == LEADS
    assert abs((approval.escalate_at - approval.created_at).total_seconds() - 600) < 1

    # A second before it is due, nothing moves.
    assert services.run_reconcile(now=approval.escalate_at - timedelta(seconds=1))["escalated_approvals"] == 0
    assert ApprovalRequest.objects.get(id=approval.id).approver_role.name == "secops"

    done = services.run_reconcile(now=approval.escalate_at + timedelta(seconds=1))
    assert done["escalated_approvals"] == 1 and done["expired_approvals"] == 0
    approval.refresh_from_db()
    assert (approval.approver_role.name, approval.escalated_from_role.name, approval.status) == (LEADS, "secops", "pending")
    [moved] = events(run.id, "approval_escalated")
    assert (moved["from_role"], moved["to_role"]) == ("secops", LEADS)
    # Once only: the next tick leaves it where it is.
    assert services.run_reconcile(now=approval.escalate_at + timedelta(seconds=60))["escalated_approvals"] == 0

    # The first role lost it: out of its queue, and its members may no longer decide it.
    with pytest.raises(Forbidden) as refused:
        approval_decide(approval_id=approval.id, user=leads["approver"], approve=True, via="session")
    assert "escalated to 'secops-leads'" in refused.value.message
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=leads["lead1"], approve=True, reason="lead ok", via="session")
    run.refresh_from_db()
    assert run.status == "succeeded" and tools_called(run.id).count("delete_account") == 1
    assert not CrmAccount.objects.filter(account_id="A-300").exists()
    [sealed] = json.loads(Receipt.objects.get(run=run).body)["approvals"]
    assert sealed["approver_role"] == LEADS and sealed["escalated_from_role"] == "secops"
    assert sealed["escalated_at"].endswith("Z") and sealed["decided_by"] == "lead1"
    assert receipt_verify_chain().valid


def test_the_queue_follows_the_escalation(leads, client):
    _, approval = parked()
    client.force_login(leads["approver"])
    assert f"approval-{approval.id}" in client.get("/admin/runs/approvalrequest/queue/").content.decode()
    services.run_reconcile(now=approval.escalate_at)
    assert f"approval-{approval.id}" not in client.get("/admin/runs/approvalrequest/queue/").content.decode()
    client.force_login(leads["lead1"])
    page = client.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert f"approval-{approval.id}" in page and f"escalated-{approval.id}" in page and "from <strong>secops</strong>" in page


def test_the_escalation_role_finds_the_whole_quorum_again(leads, django_capture_on_commit_callbacks):
    governance_services.policy_update(policy=Policy.objects.get(name="side-effects-need-secops"), values={"quorum": 2})
    run, approval = parked()
    approval_decide(approval_id=approval.id, user=leads["approver"], approve=True, via="session")
    services.run_reconcile(now=approval.escalate_at)
    approval.refresh_from_db()
    assert (approval.approvals_count, approval.quorum) == (0, 2)  # secops' approval is on record, not counted
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=leads["lead1"], approve=True, via="session")
        assert ApprovalRequest.objects.get(id=approval.id).status == "pending"
        approval_decide(approval_id=approval.id, user=leads["lead2"], approve=True, via="session")
    approval.refresh_from_db()
    assert approval.status == "approved"
    [sealed] = json.loads(Receipt.objects.get(run=run).body)["approvals"]
    assert [(d["by"], d["role"]) for d in sealed["decisions"]] == [("approver", "secops"), ("lead1", LEADS),
                                                                   ("lead2", LEADS)]


def test_expiry_after_escalation_still_counts_as_denied(leads, django_capture_on_commit_callbacks):
    run, approval = parked()
    services.run_reconcile(now=approval.escalate_at)
    with django_capture_on_commit_callbacks(execute=True):
        done = services.run_reconcile(now=approval.expires_at + timedelta(seconds=1))
    assert done["expired_approvals"] == 1
    approval.refresh_from_db()
    assert approval.status == "expired" and approval.escalated_from_role.name == "secops"
    run.refresh_from_db()
    assert run.status == "succeeded" and CrmAccount.objects.filter(account_id="A-300").exists()
    [call] = [e for e in events(run.id, "tool_call") if e["name"] == "delete_account"]
    assert call["result"]["code"] == "denied" and call["result"]["details"]["decision"] == "expired"


def test_a_request_past_its_ttl_expires_rather_than_escalates(leads, django_capture_on_commit_callbacks):
    _, approval = parked()
    with django_capture_on_commit_callbacks(execute=True):
        done = services.run_reconcile(now=approval.expires_at + timedelta(seconds=1))
    assert (done["expired_approvals"], done["escalated_approvals"]) == (1, 0)
    approval.refresh_from_db()
    assert approval.status == "expired" and approval.escalated_at is None


def test_a_decided_request_does_not_escalate(leads, django_capture_on_commit_callbacks):
    _, approval = parked()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=leads["approver"], approve=False, reason="no", via="session")
    assert services.run_reconcile(now=approval.escalate_at)["escalated_approvals"] == 0
    approval.refresh_from_db()
    assert approval.approver_role.name == "secops" and approval.escalated_at is None
    with pytest.raises(Conflict):
        approval_decide(approval_id=approval.id, user=leads["approver2"], approve=True, via="session")


def test_the_api_shows_where_an_escalated_request_came_from(leads, approver):
    _, approval = parked()
    services.run_reconcile(now=approval.escalate_at)
    # The first role still reads it (and may filter for escalated ones), but no longer decides it.
    listed = approver.get("/api/v1/approvals/", {"escalated": "true"}).json()["results"]
    [row] = [r for r in listed if r["id"] == str(approval.id)]
    assert (row["approver_role"], row["escalated_from_role"]) == (LEADS, "secops") and row["escalated_at"]
    refused = approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    assert refused.status_code == 403
