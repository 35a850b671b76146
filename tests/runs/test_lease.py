"""Heartbeat-renewed leases and handing runs back at shutdown (runs.lease), in-process.

The durability suite (tests/services) does the same with real workers that are killed; here the
worker is this process, its step a tool that holds it open longer than the lease.
"""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents.models import Tool
from runs import lease, services
from runs.advance import run_advance
from runs.models import Run

SEEN: list[dict] = []


def slow_list(args: dict, ctx) -> list:
    """Holds the step open three leases long, then says what the run's row held meanwhile."""
    time.sleep(3 * lease.lease_seconds())
    run = Run.objects.get(id=ctx.run_id)
    lapsed = Run.objects.filter(id=run.id, status="running", lease_expires_at__lt=timezone.now()).exists()
    SEEN.append({"status": run.status, "live": run.lease_expires_at > timezone.now(), "lapsed": lapsed})
    return []


def stop_here(args: dict, ctx) -> list:
    lease.request_shutdown()  # a warm shutdown arrives while the step runs
    return []


@pytest.fixture
def short_lease(settings):
    settings.WARRANT = {**settings.WARRANT, "LEASE_SECONDS": 0.6, "HEARTBEAT_SECONDS": 0.1}
    yield
    lease.request_shutdown(False)


def _queued(text: str) -> Run:
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=User.objects.get(username="operator"))
    return run


@pytest.mark.django_db(transaction=True)
def test_a_step_longer_than_the_lease_keeps_its_run(demo, short_lease):
    Tool.objects.filter(name="list_accounts").update(handler=f"{__name__}.slow_list")
    SEEN.clear()
    run = _queued("List all accounts.")  # advanced here and now, once it commits (the embedded default)
    # Three leases into the step the run was still running with a live lease: nothing the
    # reconciler would take for a lost worker's run.
    assert SEEN == [{"status": "running", "live": True, "lapsed": False}]
    run.refresh_from_db()
    assert run.status == "succeeded" and run.events.filter(kind="claimed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_renewal_never_takes_a_run_back_from_the_worker_that_took_it_over(demo, short_lease):
    run = _queued("List all accounts.")
    Run.objects.filter(id=run.id).update(status="running", lease_owner="new-owner:2",
                                         lease_expires_at=timezone.now() + timedelta(seconds=30))
    assert lease.renew(run.id, "old-owner:1") is False
    assert lease.renew(run.id, "new-owner:2") is True
    assert Run.objects.get(id=run.id).lease_owner == "new-owner:2"


@pytest.mark.django_db(transaction=True)
def test_at_shutdown_the_run_goes_back_to_the_queue_after_the_current_step(demo, short_lease):
    Tool.objects.filter(name="list_accounts").update(handler=f"{__name__}.stop_here")
    run = _queued("List all accounts.")
    run.refresh_from_db()
    # Released at once, not left running until its lease lapses: the step it was in is saved.
    assert (run.status, run.lease_owner, run.lease_expires_at) == ("queued", "", None)
    assert run.step >= 1 and run.events.filter(kind="tool_call").count() == 1
    # A delivery that arrives while the process is still going away does not claim it.
    run_advance(run_id=str(run.id), worker="elsewhere:1")
    assert Run.objects.get(id=run.id).events.filter(kind="claimed").count() == 1
    lease.request_shutdown(False)
    run_advance(run_id=str(run.id), worker="another:2")
    run.refresh_from_db()
    assert run.status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_after_a_database_failure_the_run_is_handed_back_by_the_worker_holding_it(demo, short_lease):
    """runs.lease.hand_back, as a worker's task calls it when its connection died under a step
    (tests/services/test_pg_restart.py restarts PostgreSQL under real workers). The runs stop
    after their first step (a shutdown played in the tool) so that each has a step left."""
    Tool.objects.filter(name="list_accounts").update(handler=f"{__name__}.stop_here")
    held = _queued("List all accounts.")
    lease.request_shutdown(False)
    queued = _queued("List all accounts.")
    lease.request_shutdown(False)
    Run.objects.filter(id=held.id).update(status="running", lease_owner="w:1",
                                          lease_expires_at=timezone.now() + timedelta(seconds=30))
    assert lease.hand_back(held.id, "other:2", within=0) is False  # not that worker's: left alone
    assert Run.objects.get(id=held.id).lease_owner == "w:1"
    # Released and sent again at once (the embedded default takes it up here and now), not left
    # to its lease.
    assert lease.hand_back(held.id, "w:1", within=0) is True
    held.refresh_from_db()
    assert held.status == "succeeded" and held.events.filter(kind="claimed").count() == 2
    assert lease.hand_back(held.id, "w:1", within=0) is False  # ended: nothing to hand back
    # A queued run whose claim failed: its message is sent again.
    assert Run.objects.get(id=queued.id).status == "queued"
    assert lease.hand_back(queued.id, "w:1", within=0) is True
    assert Run.objects.get(id=queued.id).status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_one_thread_renews_every_lease_the_process_holds_and_a_finished_beat_is_not_reported_lost(demo, short_lease):
    import threading

    first, second = _queued("List all accounts."), _queued("List all accounts.")
    until = timezone.now() + timedelta(seconds=30)
    Run.objects.filter(id__in=[first.id, second.id]).update(status="running", lease_owner="w:1", lease_expires_at=until)
    with lease.Heartbeat(first.id, "w:1") as one, lease.Heartbeat(second.id, "w:1") as two:
        deadline = time.monotonic() + 30
        while (one.renewals < 2 or two.renewals < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        beating = [t for t in threading.enumerate() if t.name.startswith("warrant-heartbeat")]
        assert one.renewals >= 2 and two.renewals >= 2 and len(beating) == 1
        # Taken over by another worker: the next renewal finds it so, and says the lease is lost.
        Run.objects.filter(id=second.id).update(lease_owner="other:2")
        while not two.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert two.lost and not one.lost
    # The block has ended: the run is released as a worker would, and no renewal marks it lost.
    Run.objects.filter(id=first.id).update(status="queued", lease_owner="", lease_expires_at=None)
    time.sleep(5 * lease.heartbeat_seconds())
    assert not one.lost
    assert Run.objects.get(id=second.id).lease_owner == "other:2"
