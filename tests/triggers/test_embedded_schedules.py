"""Without a broker there is no beat: the web process's ticker fires due schedules itself
(triggers.schedules.fire_due, registered with runs.ticker). The same missed rule as beat's, and each
tick fires once however many processes tick: the fire claims the trigger's last_fire_at with one
conditional update, so a second ticker that found the same tick due fires nothing."""

from datetime import timedelta

import pytest
from django.db import connection

from runs import ticker
from runs.models import Run
from tests.triggers.helpers import race, schedule
from triggers import services
from triggers.models import Trigger, TriggerFire
from triggers.schedules import fire_due, schedule_fire

pytestmark = pytest.mark.django_db(transaction=True)


def _created(trigger: Trigger):
    return Trigger.objects.get(pk=trigger.pk).created_at


def test_a_tick_fires_when_it_is_due_and_not_before(demo):
    trigger = schedule("every-minute", interval_seconds=60)
    t0 = _created(trigger)
    assert fire_due(now=t0 + timedelta(seconds=30)) == 0 and not TriggerFire.objects.exists()
    assert fire_due(now=t0 + timedelta(seconds=61)) == 1
    fire = TriggerFire.objects.get()
    assert fire.outcome == "started" and fire.run.status == "succeeded"
    assert fire.scheduled_for == t0 + timedelta(seconds=60)  # the tick itself, not when the ticker looked
    # The next tick is a minute after that fire: the ticks in between fire nothing.
    assert fire_due(now=t0 + timedelta(seconds=65)) == 0
    assert fire_due(now=t0 + timedelta(seconds=122)) == 1
    assert TriggerFire.objects.count() == 2 and Run.objects.count() == 2


def test_a_second_ticker_that_found_the_same_tick_due_fires_nothing(demo):
    trigger = schedule("every-minute", interval_seconds=60)
    now = _created(trigger) + timedelta(seconds=61)
    # Both read last_fire_at (None) and found the tick due; the first to claim it fires it.
    assert schedule_fire(trigger.pk, now=now, claim=None).outcome == "started"
    assert schedule_fire(trigger.pk, now=now + timedelta(milliseconds=5), claim=None) is None
    assert fire_due(now=now) == 0
    assert TriggerFire.objects.count() == 1 and Run.objects.count() == 1


@pytest.mark.parametrize("rule, outcome, runs", [("skip", "skipped", 0), ("run_once", "started", 1)])
def test_downtime_is_one_late_fire_that_follows_the_missed_rule(demo, rule, outcome, runs):
    trigger = schedule("hourly", interval_seconds=3600, missed=rule)
    t0 = _created(trigger)
    assert fire_due(now=t0 + timedelta(hours=1, seconds=2)) == 1
    # The web process was down for five hours: the first tick after it is one fire, not five.
    back = t0 + timedelta(hours=6, seconds=30)
    assert fire_due(now=back) == 1 and fire_due(now=back + timedelta(seconds=5)) == 0
    late = TriggerFire.objects.order_by("-received_at").first()
    assert late.outcome == outcome and Run.objects.count() == 1 + runs
    if rule == "skip":
        assert late.reason.startswith("missed: due at ") and "rule skip" in late.reason
    # The next tick after the late one is on time again.
    assert fire_due(now=back + timedelta(hours=1, seconds=1)) == 1
    assert TriggerFire.objects.order_by("-received_at").first().outcome == "started"


def test_a_crontab_fires_at_its_time_in_the_triggers_zone(demo):
    trigger = schedule("paris-morning", cron="0 7 * * *", timezone="Europe/Paris")
    created = _created(trigger)
    seven_paris = (created + timedelta(days=1)).replace(hour=6, minute=0, second=0, microsecond=0)  # UTC, winter
    if seven_paris - created > timedelta(days=1):
        seven_paris -= timedelta(days=1)
    assert fire_due(now=seven_paris - timedelta(seconds=1)) == 0
    assert fire_due(now=seven_paris + timedelta(seconds=3)) == 1
    assert TriggerFire.objects.get().scheduled_for == seven_paris


def test_a_paused_trigger_is_not_fired_and_a_webhook_never(demo):
    from tests.triggers.helpers import webhook

    trigger = schedule("every-minute", interval_seconds=60)
    webhook("helpdesk")
    services.trigger_pause(trigger, by=None)
    assert fire_due(now=_created(trigger) + timedelta(hours=1)) == 0 and not TriggerFire.objects.exists()


def test_the_ticker_runs_the_registered_jobs(demo):
    assert {"triggers.fire_schedules", "triggers.drain"} <= set(ticker._jobs)
    trigger = schedule("every-second", interval_seconds=1)
    Trigger.objects.filter(pk=trigger.pk).update(created_at=_created(trigger) - timedelta(seconds=2))
    done = ticker.run_embedded_jobs()
    assert done["triggers.fire_schedules"] == 1 and done["triggers.drain"] == 0
    assert TriggerFire.objects.get().outcome == "started"


RACERS = 4


def test_tickers_racing_on_one_due_tick_fire_it_once(demo):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes the write lock at BEGIN (IMMEDIATE): the race is PostgreSQL's")
    trigger = schedule("every-minute", interval_seconds=60, concurrency="allow")
    now = _created(trigger) + timedelta(seconds=61)
    fired = race(lambda: fire_due(now=now), RACERS)
    assert sorted(fired) == [0] * (RACERS - 1) + [1]
    assert TriggerFire.objects.count() == 1 and Run.objects.count() == 1
