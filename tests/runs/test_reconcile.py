"""The reconciler: expired approvals count as denied, lost work goes back on the queue."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents.models import CrmAccount
from runs import services
from runs.models import ApprovalRequest, Run

pytestmark = pytest.mark.django_db


def _start(text: str) -> Run:
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=User.objects.get(username="operator"))
    return run


def test_an_expired_request_counts_as_denied_and_says_so(demo, django_capture_on_commit_callbacks):
    run = _start("Delete the account Initech.")
    services.run_advance(run_id=run.id)
    ApprovalRequest.objects.filter(run=run).update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        result = services.run_reconcile()
    assert result["expired_approvals"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert "expired" in run.output
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    approval = ApprovalRequest.objects.get(run=run)
    assert approval.status == "expired" and approval.decided_by is None
    assert '"decision":"expired"' in run.receipt.body
    # The model is told what docs/design.md promises for a denied or expired call: code "denied".
    [call] = [e.data for e in run.events.filter(kind="tool_call") if e.data["name"] == "delete_account"]
    assert call["result"]["code"] == "denied" and call["result"]["details"]["decision"] == "expired"


def test_deciding_an_expired_request_is_refused_and_expires_it(demo, approver):
    run = _start("Delete the account Initech.")
    services.run_advance(run_id=run.id)
    approval = ApprovalRequest.objects.get(run=run)
    ApprovalRequest.objects.filter(id=approval.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    assert response.status_code == 409 and response.json()["error"]["details"]["status"] == "expired"
    assert ApprovalRequest.objects.get(id=approval.id).status == "expired"
    assert CrmAccount.objects.filter(account_id="A-300").exists()


def test_a_run_whose_worker_vanished_is_taken_over_after_its_lease(demo, django_capture_on_commit_callbacks):
    run = _start("List all accounts.")
    # A worker claimed it and died: status running, lease already past.
    Run.objects.filter(id=run.id).update(status="running", lease_owner="dead-worker",
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        result = services.run_reconcile()
    assert result["lost_leases"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded" and run.lease_owner == ""


def test_a_live_lease_is_left_alone(demo, django_capture_on_commit_callbacks):
    run = _start("List all accounts.")
    Run.objects.filter(id=run.id).update(status="running", lease_owner="busy-worker",
                                         lease_expires_at=timezone.now() + timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        result = services.run_reconcile()
        services.run_advance(run_id=run.id)  # a duplicate message meanwhile is a no-op too
    assert result["lost_leases"] == 0
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.step) == ("running", "busy-worker", 0)


def test_a_queued_run_that_lost_its_message_is_enqueued_again(demo, django_capture_on_commit_callbacks):
    run = _start("List all accounts.")
    Run.objects.filter(id=run.id).update(status_changed_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        result = services.run_reconcile()
    assert result["stale_queued"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded"


READS = ["the run", "the runs list", "the approvals list", "the workbench queue", "the workbench run page"]


@pytest.mark.parametrize("read", READS)
def test_looking_at_an_overdue_request_changes_nothing_and_the_reconciler_closes_it(
        demo, operator, approver, read, django_capture_on_commit_callbacks):
    from django.test import Client

    run = _start("Delete the account Initech.")
    services.run_advance(run_id=run.id)
    ApprovalRequest.objects.filter(run=run).update(expires_at=timezone.now() - timedelta(seconds=1))
    browser = Client()
    browser.force_login(User.objects.get(username="compliance"))
    pages = {"the run": lambda: operator.get(f"/api/v1/runs/{run.id}/"),
             "the runs list": lambda: operator.get("/api/v1/runs/"),
             "the approvals list": lambda: approver.get("/api/v1/approvals/"),
             "the workbench queue": lambda: browser.get("/admin/runs/approvalrequest/queue/"),
             "the workbench run page": lambda: browser.get(f"/admin/runs/run/{run.id}/change/")}
    with django_capture_on_commit_callbacks(execute=True) as published:
        assert pages[read]().status_code == 200
    assert published == []
    assert ApprovalRequest.objects.get(run=run).status == "pending"
    assert Run.objects.get(id=run.id).status == "awaiting_approval"
    with django_capture_on_commit_callbacks(execute=True):
        assert services.run_reconcile()["expired_approvals"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded" and "expired" in run.output


def test_looking_at_a_run_whose_step_died_changes_nothing_and_the_reconciler_takes_it_up(
        demo, operator, django_capture_on_commit_callbacks):
    run = _start("List all accounts.")
    # Its step died (a storage error, a killed process) with the run claimed: running, lease past.
    Run.objects.filter(id=run.id).update(status="running", lease_owner="gone",
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True) as published:
        assert operator.get(f"/api/v1/runs/{run.id}/").json()["status"] == "running"
    assert published == [] and Run.objects.get(id=run.id).status == "running"
    with django_capture_on_commit_callbacks(execute=True):
        assert services.run_reconcile()["lost_leases"] == 1
    run.refresh_from_db()
    assert run.status == "succeeded" and run.receipt is not None


def test_a_lapsed_lease_whose_embedded_worker_still_runs_here_is_left_to_it(demo, django_capture_on_commit_callbacks):
    """A step may outlast its lease when nothing bounds it (a slow model, long tools): the
    reconciler does not take a run from another worker process on this host that still runs (this
    pytest process's parent stands for it; this process's own runs are tests/runs/test_claim_in_write.py's)."""
    import os
    import socket

    run = _start("List all accounts.")
    Run.objects.filter(id=run.id).update(status="running", lease_owner=f"{socket.gethostname()}:{os.getppid()}",
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True) as published:
        assert services.run_reconcile()["lost_leases"] == 0
    assert published == [] and Run.objects.get(id=run.id).status == "running"
