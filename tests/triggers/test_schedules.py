"""Schedule triggers: their periodic task in django-celery-beat follows the trigger, a tick fires
the trigger (or is skipped by its rules), and the missed-fire rule, with a controlled clock
(schedule_fire's `now`), turns downtime into one fire or none, never a burst."""

import json
from datetime import datetime, timedelta, timezone

import pytest
from django_celery_beat.models import PeriodicTask

from core.api_errors import DomainError
from runs.models import Run
from tests.triggers.helpers import schedule
from triggers import services
from triggers.models import TriggerFire
from triggers.schedules import schedule_fire
from triggers.signatures import digest_json

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 12, 1, 6, 0, 5, tzinfo=timezone.utc)


def test_the_periodic_task_follows_the_trigger(demo, admin):
    trigger = schedule("morning", cron="0 7 * * 1-5", timezone="Europe/Paris")
    task = PeriodicTask.objects.get(name="trigger:morning")
    assert task.task == "triggers.fire_schedule" and json.loads(task.kwargs) == {"trigger_id": trigger.pk}
    assert task.enabled and task.crontab.hour == "7" and task.crontab.day_of_week == "1-5"
    assert str(task.crontab.timezone) == "Europe/Paris" and task.interval is None
    services.trigger_pause(trigger, by=None)
    assert not PeriodicTask.objects.get(pk=task.pk).enabled
    services.trigger_resume(trigger, by=None)
    trigger = services.trigger_update(trigger, cron="", interval_seconds=900)
    task = PeriodicTask.objects.get(pk=task.pk)
    assert task.enabled and task.crontab is None and task.interval.every == 900


@pytest.mark.parametrize("options, problem", [
    ({"cron": "0 7 * *"}, "five fields"),
    ({"cron": "61 7 * * *"}, "cron"),
    ({"cron": "0 7 * * *", "timezone": "Mars/Olympus"}, "time zone"),
    ({"cron": "0 7 * * *", "interval_seconds": 60}, "one of them"),
])
def test_a_schedule_that_cannot_be_kept_is_refused(demo, options, problem):
    with pytest.raises(DomainError, match=problem):
        schedule("bad", **options)
    assert not PeriodicTask.objects.filter(name="trigger:bad").exists()


def test_a_tick_starts_a_run_whose_receipt_records_the_schedule_fire(demo):
    trigger = schedule("morning", template="List all accounts. (fired for {{ payload.scheduled_for }})")
    fire = schedule_fire(trigger.pk, now=T0)
    assert fire.outcome == "started", fire.reason
    run = fire.run
    assert run.status == "succeeded" and run.caller.username == "scheduler-bot"
    assert run.input == f"List all accounts. (fired for {T0.isoformat()})"
    assert not run.tainted  # a schedule's input is the admin's template: trusted
    origin = json.loads(run.receipt.body)["origin"]
    payload = {"scheduled_for": T0.isoformat(), "timezone": "UTC", "late_seconds": 0}
    assert origin == {"trigger": "morning", "kind": "schedule", "scheduled_for": "2026-12-01T06:00:05Z",
                      "payload_sha256": digest_json(payload), "untrusted": False, "fire_id": str(fire.id),
                      "set_up_by": []}


def test_on_time_ticks_each_fire(demo):
    trigger = schedule("every-minute", interval_seconds=60)
    for minute in range(3):
        assert schedule_fire(trigger.pk, now=T0 + timedelta(minutes=minute, seconds=2)).outcome == "started"
    assert Run.objects.count() == 3


@pytest.mark.parametrize("rule, outcome, runs", [("skip", "skipped", 0), ("run_once", "started", 1)])
def test_a_fire_late_after_downtime_follows_the_missed_rule(demo, rule, outcome, runs):
    trigger = schedule("hourly", interval_seconds=3600, missed=rule)
    schedule_fire(trigger.pk, now=T0)
    started = Run.objects.count()
    # Beat was down for five hours: it sends one message for the overdue tick, not five.
    fire = schedule_fire(trigger.pk, now=T0 + timedelta(hours=5, seconds=3))
    assert fire.outcome == outcome
    assert Run.objects.count() - started == runs
    if rule == "skip":
        assert fire.reason.startswith("missed: due at 2026-12-01T07:00:05") and "rule skip" in fire.reason
    # The next tick after the late one is on time again: it runs, whatever the rule.
    assert schedule_fire(trigger.pk, now=T0 + timedelta(hours=6, seconds=4)).outcome == "started"


def test_a_crontab_is_read_in_the_triggers_time_zone(demo):
    # 07:00 in Paris is 06:00 UTC in winter.
    trigger = schedule("paris-morning", cron="0 7 * * *", timezone="Europe/Paris", missed="skip")
    schedule_fire(trigger.pk, now=datetime(2026, 11, 30, 6, 0, 1, tzinfo=timezone.utc))
    on_time = schedule_fire(trigger.pk, now=datetime(2026, 12, 1, 6, 0, 2, tzinfo=timezone.utc))
    assert on_time.outcome == "started" and on_time.scheduled_for == datetime(2026, 12, 1, 6, 0, tzinfo=timezone.utc)
    late = schedule_fire(trigger.pk, now=datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc))
    assert late.outcome == "skipped" and late.scheduled_for == datetime(2026, 12, 2, 6, 0, tzinfo=timezone.utc)


def test_a_schedule_follows_its_concurrency_policy(demo):
    trigger = schedule("deleter", template="Delete the account Initech.", interval_seconds=60, concurrency="skip")
    first = schedule_fire(trigger.pk, now=T0)
    assert first.run.status == "awaiting_approval"
    second = schedule_fire(trigger.pk, now=T0 + timedelta(seconds=61))
    assert second.outcome == "skipped" and "has not ended" in second.reason
    assert TriggerFire.objects.filter(trigger=trigger).count() == 2


def test_a_paused_schedules_tick_is_recorded_and_starts_nothing(demo):
    trigger = schedule("morning")
    services.trigger_pause(trigger, by=None)
    fire = schedule_fire(trigger.pk, now=T0)
    assert fire.outcome == "skipped" and "paused" in fire.reason and Run.objects.count() == 0
