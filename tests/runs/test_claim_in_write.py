"""In-process (no broker), the process that queues a run advances it once the write commits, so it
claims the run in that same write: at the start, and when a decision resumes it. With a
transaction open around the write, its commit is not the real one: the run is queued as usual."""

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runs import services
from runs.models import ApprovalRequest, Run
from runs.receipts import receipt_verify

pytestmark = pytest.mark.django_db(transaction=True)


def _run_updates_without_a_step(seen) -> int:
    """UPDATEs of a run's row that save no step (a step's checkpoint or park writes its state):
    claims and requeues."""
    return sum(1 for q in seen.captured_queries
               if q["sql"].startswith('UPDATE "runs_run"') and '"state" = ' not in q["sql"])


def _kinds(run: Run) -> list[str]:
    return list(run.events.order_by("seq").values_list("kind", flat=True))


def test_a_run_is_claimed_in_the_write_that_starts_it_and_in_the_one_that_resumes_it(demo):
    with CaptureQueriesContext(connection) as started:
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                    caller=User.objects.get(username="operator"))
    run.refresh_from_db()
    assert run.status == "awaiting_approval"
    # No UPDATE of the row but the steps': the claim went in with its INSERT.
    assert _run_updates_without_a_step(started) == 0
    assert _kinds(run)[:2] == ["run_created", "claimed"]
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    with CaptureQueriesContext(connection) as resumed:
        services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"),
                                 approve=True)
    run.refresh_from_db()
    assert run.status == "succeeded" and receipt_verify(receipt=run.receipt).valid
    # One UPDATE requeues and claims it.
    assert _run_updates_without_a_step(resumed) == 1
    kinds = _kinds(run)
    assert kinds[kinds.index("approval_decided") + 1] == "claimed"
    claims = list(run.events.filter(kind="claimed").values_list("data", flat=True))
    assert [c["delivery"] for c in claims] == [1, 1]
    assert list(run.events.order_by("seq").values_list("seq", flat=True)) == list(range(1, run.event_seq + 1))


def test_inside_an_open_transaction_the_run_is_queued_for_whoever_takes_it(demo):
    with transaction.atomic():
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                    caller=User.objects.get(username="operator"))
        assert Run.objects.get(id=run.id).status == "queued" and _kinds(run) == ["run_created"]
    run.refresh_from_db()  # the hand-on ran once the outer block committed, and claimed it then
    assert run.status == "succeeded" and _kinds(run)[:2] == ["run_created", "claimed"]


def _left_claimed(demo_run: Run) -> Run:
    """A run this process claimed and then let go of without a checkpoint (its step raised a database
    error, or its hand-on after the claiming write never ran): running, its lapsed lease ours."""
    from datetime import timedelta

    from django.utils import timezone

    from runs.harness import initial_state
    from runs.queue import embedded_worker_name

    return Run.objects.create(
        agent=demo_run.agent, agent_version=demo_run.agent_version, caller=demo_run.caller,
        caller_roles=demo_run.caller_roles, input="How healthy is Acme Corp?", snapshot=demo_run.snapshot,
        policy_snapshot_sha256=demo_run.policy_snapshot_sha256, state=initial_state("How healthy is Acme Corp?"),
        status="running", deliveries=1, lease_owner=embedded_worker_name(),
        lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_run_this_process_claimed_and_no_longer_advances_is_taken_up_by_the_reconciler(demo):
    from runs.lease import Heartbeat
    from runs.queue import embedded_worker_name
    from runs.reconcile import run_reconcile

    done, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                 caller=User.objects.get(username="operator"))
    left = _left_claimed(Run.objects.get(id=done.id))
    # While a thread of this process advances it, the lapsed lease is not a lost one.
    with Heartbeat(left.id, embedded_worker_name()):
        assert run_reconcile(queued_grace_seconds=60)["lost_leases"] == 0
    assert Run.objects.get(id=left.id).status == "running"
    # Once none does, nobody would ever finish it: the reconciler takes it up (here, in-process).
    assert run_reconcile(queued_grace_seconds=60)["lost_leases"] == 1
    left.refresh_from_db()
    assert left.status == "succeeded" and receipt_verify(receipt=left.receipt).valid


def test_a_process_shutting_down_hands_back_the_run_it_claimed_in_the_write_that_started_it(demo):
    from runs import lease

    lease.request_shutdown()
    try:
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                    caller=User.objects.get(username="operator"))
    finally:
        lease.request_shutdown(False)
    run.refresh_from_db()
    # Claimed as it was written, then given back unstepped: queued, no lease, for a process that stays.
    assert (run.status, run.lease_owner, run.lease_expires_at, run.step) == ("queued", "", None, 0)
    assert _kinds(run)[:2] == ["run_created", "claimed"]
