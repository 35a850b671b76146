"""Schedule triggers through real processes: django-celery-beat's database scheduler sends each
trigger's tick to a real Celery worker, which starts the run as the trigger's service account and
advances it; beat still runs the reconciler from the same database schedule.

The clock is controlled through what beat and the trigger remember of the last tick (the periodic
task's last_run_at and the trigger's last_fire_at, set three hours back before beat starts): that is
what beat finds after three hours of downtime, so the missed-fire rule is exercised as it happens."""

from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from runs.models import Run
from tests.services.conftest import check_invariants
from tests.services.processes import wait_for
from triggers import services
from triggers.models import Trigger, TriggerFire


def _account(name: str):
    return services.service_account_create(username=name, roles=["operators"])


def _schedule(name: str, template: str, **options) -> Trigger:
    trigger, _ = services.trigger_create(name=name, kind="schedule", agent="crm-assistant", input_template=template,
                                         service_account=_account(f"{name}-bot"), **options)
    return trigger


def _backdate(trigger: Trigger, hours: float) -> None:
    then = timezone.now() - timedelta(hours=hours)
    PeriodicTask.objects.filter(pk=trigger.periodic_task_id).update(last_run_at=then)
    Trigger.objects.filter(pk=trigger.pk).update(last_fire_at=then)


def test_beat_fires_schedules_through_a_worker_with_their_rules(cluster):
    every = _schedule("every-two", "List all accounts.", interval_seconds=2)
    parked = _schedule("deleter", "Delete the account Initech.", interval_seconds=2, concurrency="skip")
    # Hourly, and beat was "down" for three hours: one late fire each, never three.
    once = _schedule("hourly-once", "List all accounts.", interval_seconds=3600, missed="run_once")
    skipped = _schedule("hourly-skip", "List all accounts.", interval_seconds=3600, missed="skip")
    for trigger in (once, skipped):
        _backdate(trigger, 3)
    cluster.worker()
    beat = cluster.beat()

    def fires(trigger, **filters):
        return TriggerFire.objects.filter(trigger=trigger, **filters)

    wait_for(lambda: fires(every, run__status="succeeded").count() >= 3, timeout=60, interval=0.5,
             what="three succeeded runs of the two-second schedule")
    wait_for(lambda: fires(parked, outcome="skipped").count() >= 2, timeout=60, interval=0.5,
             what="the parked trigger's later ticks skipped")
    wait_for(lambda: fires(once).exists() and fires(skipped).exists(), timeout=30, interval=0.5,
             what="the overdue hourly ticks")
    runs = Run.objects.filter(trigger_fire__trigger=every)
    assert {r.caller.username for r in runs} == {"every-two-bot"}
    assert all(r.snapshot["origin"]["kind"] == "schedule" for r in runs)
    # skip: one run parked for approval, the ticks during it recorded, none started.
    assert fires(parked, outcome="started").count() == 1
    assert fires(parked, outcome="started").get().run.status == "awaiting_approval"
    assert all("has not ended" in f.reason for f in fires(parked, outcome="skipped"))
    # Beat's own scheduler kept the reconciler (the static entry, now a row beside the triggers').
    assert PeriodicTask.objects.filter(name="warrant-reconcile", task="runs.run_reconcile", enabled=True).exists()
    wait_for(lambda: b"Sending due task warrant-reconcile (runs.run_reconcile)" in beat.log.read_bytes(), timeout=20,
             what="beat to send the reconciler")
    # A few more seconds: the hourly triggers fired once each, and no more.
    started = fires(every).count()
    wait_for(lambda: fires(every).count() >= started + 2, timeout=30, interval=0.5, what="two more ticks")
    assert fires(once).count() == 1 and fires(once).get().outcome == "started"
    wait_for(lambda: fires(once).get().run.status == "succeeded", timeout=30, what="the late run to finish")
    late = fires(skipped).get()
    assert fires(skipped).count() == 1 and late.outcome == "skipped" and late.reason.startswith("missed:")
    assert not Run.objects.filter(trigger_fire__trigger=skipped).exists()
    check_invariants()


def test_a_paused_schedule_is_not_sent_by_beat_and_a_new_one_is_picked_up_while_it_runs(cluster):
    trigger = _schedule("paused", "List all accounts.", interval_seconds=1)
    services.trigger_pause(trigger, by=None)
    cluster.start()
    canary = _schedule("canary", "List all accounts.", interval_seconds=1)
    wait_for(lambda: TriggerFire.objects.filter(trigger=canary).count() >= 2, timeout=60, interval=0.5,
             what="the canary's ticks")
    assert not TriggerFire.objects.filter(trigger=trigger).exists()
