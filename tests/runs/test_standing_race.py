"""A revocation racing a call on PostgreSQL: the call that looked the approval up while the revocation
was being written must not use it once the revocation commits (runs.standing.standing_use checks
and counts in one conditional update, which waits for the revoker's row lock and then re-reads)."""

import json
import os
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction
from django.utils import timezone

from governance.models import Policy
from runs import services
from runs.models import StandingApproval
from runs.standing import standing_grant, standing_use

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                       reason="row locks as PostgreSQL takes them"),
]

EMAIL = {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hello"}


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0] > 0


def test_a_revocation_that_commits_while_a_call_checks_wins(replay_agent):
    approver = User.objects.get(username="approver")
    granted = standing_grant(user=approver, tool="send_email", agent=None, role="secops", reason="race",
                             arguments={k: {"equals": v} for k, v in EMAIL.items()}, via="session",
                             expires_at=timezone.now() + timedelta(days=1))
    run, _ = services.run_start(agent_slug="replayer", caller=User.objects.get(username="operator"),
                                input_text=json.dumps({"turns": []}))
    policy = {"policy_id": Policy.objects.get(name="side-effects-need-secops").pk}
    locked, outcome = threading.Event(), {}

    def revoke():
        try:
            with transaction.atomic():
                standing = StandingApproval.objects.select_for_update().get(pk=granted.pk)
                standing.revoked_at, standing.revoked_by = timezone.now(), approver
                standing.save(update_fields=["revoked_at", "revoked_by"])
                locked.set()
                deadline = time.monotonic() + 20
                while not _waiting_on_a_lock() and time.monotonic() < deadline:
                    time.sleep(0.05)
                outcome["saw_the_call_wait"] = _waiting_on_a_lock()
        finally:
            connections.close_all()

    revoker = threading.Thread(target=revoke)
    revoker.start()
    assert locked.wait(10)
    used = standing_use(run=run, call={"id": "c1", "name": "send_email", "arguments": EMAIL}, approver_role="secops",
                        policy=policy)
    revoker.join(30)
    assert outcome["saw_the_call_wait"], "the call's update waited for the revoker's lock"
    assert used is None
    assert StandingApproval.objects.get(pk=granted.pk).uses == 0
