"""Approval notices from real Celery workers (PostgreSQL, Redis): the worker that parks a run
posts the request once its park commits, a worker's reconciler tick posts the expiry reminder
once, and the decision is posted by the process that made it. A real receiver on loopback
checks every signature (tests/runs/test_notify_webhook.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import ApprovalRequest
from tests import loopback
from tests.runs.test_notify_webhook import SECRET, Receiver
from tests.services.conftest import approve, check_invariants, email, start_run, wait_status
from tests.services.processes import wait_for


def test_workers_post_the_park_and_the_reminder_and_the_decision_once_each(cluster, fault_agent, scenario,
                                                                         settings):
    # A port the system picks (Receiver's default): free whatever else runs beside, xdist workers included.
    with loopback.running(Receiver()) as receiver:
        hook = {"WARRANT_NOTIFY_WEBHOOK_URL": f"http://127.0.0.1:{receiver.port}/warrant",
                "WARRANT_NOTIFY_WEBHOOK_SECRET": SECRET, "WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
                "WARRANT_WORKER_RECONCILE_SECONDS": "1"}
        cluster.env.update(hook)
        settings.WARRANT_NOTIFY_WEBHOOK_URL = hook["WARRANT_NOTIFY_WEBHOOK_URL"]
        settings.WARRANT_NOTIFY_WEBHOOK_SECRET = SECRET
        settings.WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS = ("127.0.0.1",)
        cluster.worker()
        run = start_run({"turns": [[email("quarterly numbers")]], "final": "sent"})
        wait_status(run, {"awaiting_approval"})
        wait_for(lambda: len(receiver.received) >= 1, timeout=30, what="the park's notice")
        approval = ApprovalRequest.objects.get(run=run)

        # Into its last hour of 72: the worker's own reconciler tick reminds.
        now = timezone.now()
        ApprovalRequest.objects.filter(id=approval.id).update(created_at=now - timedelta(hours=72),
                                                             expires_at=now + timedelta(minutes=10))
        wait_for(lambda: len(receiver.received) >= 2, timeout=30, what="the reminder")
        # Three more ticks of the worker's reconciler (one a second) remind no one again.
        with pytest.raises(TimeoutError):
            wait_for(lambda: len(receiver.received) > 2, timeout=3.5, what="a second reminder")
        approve(run)
        wait_status(run, {"succeeded"})
        wait_for(lambda: len(receiver.received) >= 3, timeout=30, what="the decision's notice")
        events = [(r["body"]["event"], r["body"]["approval_id"], r["signed"]) for r in receiver.received]
        assert events == [("approval.requested", str(approval.id), True), ("approval.expiring", str(approval.id), True),
                          ("approval.decided", str(approval.id), True)]
        assert receiver.received[2]["body"]["status"] == "approved"
        assert b"quarterly numbers" not in b"".join(r["raw"] for r in receiver.received)
        assert ApprovalRequest.objects.get(id=approval.id).reminded_at is not None
        check_invariants(scenario)
