"""Two reconcilers at once remind a request's approvers once (PostgreSQL: real concurrent
transactions; the conditional UPDATE of reminded_at decides)."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection, connections

from runs import notify, services
from runs.demo import demo_load
from runs.models import ApprovalRequest

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not connection.vendor == "postgresql", reason="concurrent transactions need PostgreSQL"),
]


def test_reconcilers_racing_remind_once():
    demo_load()
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                caller=get_user_model().objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    approval = ApprovalRequest.objects.get(run=run)
    mail.outbox.clear()
    now = approval.expires_at - timedelta(minutes=5)
    start, counts = threading.Barrier(4), []

    def tick():
        try:
            start.wait()
            counts.append(notify.remind_expiring(now=now))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=tick) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(counts) == [0, 0, 0, 1]
    assert [m.to for m in mail.outbox] == [["approver@example.com"]]
    assert ApprovalRequest.objects.get(id=approval.id).reminded_at == now
