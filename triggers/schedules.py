"""A schedule trigger's periodic task in django-celery-beat, and what a tick does.

The trigger owns its PeriodicTask (crontab in the trigger's time zone, or an interval): written in
the same transaction as the trigger, enabled while the trigger is, so beat's database scheduler
(which notices the change) fires `triggers.fire_schedule` for it. Beat itself sends one message for
a tick that fell due while it was down, however many ticks were missed, so downtime never becomes a
burst; the trigger's `missed` rule then decides that late fire: run it once, or record it skipped.
A fire is late when it comes more than MISSED_GRACE_SECONDS after the tick it was due at (the first
tick after the previous fire).
"""

import json
import os
from datetime import timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask
from django_celery_beat.tzcrontab import TzAwareCrontab

from triggers import firing
from triggers.signatures import digest_json
from triggers.models import Trigger, TriggerFire

TASK = "triggers.fire_schedule"
# Beat's database scheduler checks every few seconds; a fire later than this after its tick is one
# beat (or the broker, or every worker) was not there for.
MISSED_GRACE_SECONDS = float(os.environ.get("WARRANT_TRIGGER_MISSED_GRACE_SECONDS", "60"))
MIN_INTERVAL_SECONDS = 1


def cron_fields(cron: str) -> dict | None:
    """The five fields of "m h dom mon dow", or None when it is not five."""
    parts = cron.split()
    if len(parts) != 5:
        return None
    return dict(zip(("minute", "hour", "day_of_month", "month_of_year", "day_of_week"), parts))


def schedule_problem(*, cron: str, interval_seconds, tz: str) -> str | None:
    """Why this schedule cannot be kept, or None."""
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {tz!r}"
    if bool(cron) == (interval_seconds is not None):
        return "a schedule has a cron expression or an interval, one of them"
    if interval_seconds is not None:
        return None if interval_seconds >= MIN_INTERVAL_SECONDS else "the interval is at least one second"
    fields = cron_fields(cron)
    if fields is None:
        return "cron has five fields: minute hour day-of-month month day-of-week"
    try:
        TzAwareCrontab(tz=zone, **fields)
    except (ValueError, KeyError, IndexError) as exc:
        return f"cron: {exc}"
    return None


def sync(trigger: Trigger) -> None:
    """Make the trigger's periodic task say what the trigger says (inside the caller's transaction)."""
    task = trigger.periodic_task
    if trigger.kind != Trigger.Kind.SCHEDULE:
        if task is not None:
            trigger.periodic_task = None
            trigger.save(update_fields=["periodic_task"])
            task.delete()
        return
    fields = {"crontab": None, "interval": None}
    if trigger.interval_seconds is not None:
        fields["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=trigger.interval_seconds, period=IntervalSchedule.SECONDS)
    else:
        fields["crontab"], _ = CrontabSchedule.objects.get_or_create(
            **cron_fields(trigger.cron), timezone=ZoneInfo(trigger.timezone))
    values = fields | {"name": f"trigger:{trigger.name}", "task": TASK, "enabled": trigger.enabled,
                       "kwargs": json.dumps({"trigger_id": trigger.pk}),
                       "description": f"Fires trigger {trigger.name} (managed from the trigger: edit it there)."}
    if task is None:
        trigger.periodic_task = PeriodicTask.objects.create(**values)
        trigger.save(update_fields=["periodic_task"])
    else:
        for key, value in values.items():
            setattr(task, key, value)
        task.save()


def due_after(trigger: Trigger, last, now):
    """The first tick of the trigger's schedule after `last`, as seen at `now`."""
    if trigger.interval_seconds is not None:
        return last + timedelta(seconds=trigger.interval_seconds)
    zone = ZoneInfo(trigger.timezone)
    crontab = TzAwareCrontab(tz=zone, **cron_fields(trigger.cron))
    crontab.nowfun = lambda: now.astimezone(zone)
    return now + crontab.remaining_estimate(last.astimezone(zone))


_FROM_BEAT = object()


def schedule_fire(trigger_id: int, *, now=None, claim=_FROM_BEAT) -> TriggerFire | None:
    """One tick from beat: fire the trigger, or record the tick skipped by its rules. None when
    the trigger is gone or is no longer a schedule.

    `claim` (the embedded ticker, fire_due): the last_fire_at it read. The tick fires only if the
    trigger's last_fire_at is still that, moved to `now` by one conditional update, so of two
    processes that both found the tick due exactly one fires it; the other gets None."""
    now = now or timezone.now()
    with transaction.atomic():
        if claim is not _FROM_BEAT and not Trigger.objects.filter(
                pk=trigger_id, kind=Trigger.Kind.SCHEDULE, enabled=True, last_fire_at=claim).update(last_fire_at=now):
            return None
        trigger = Trigger.objects.select_for_update().filter(pk=trigger_id, kind=Trigger.Kind.SCHEDULE).first()
        if trigger is None:
            return None
        if claim is _FROM_BEAT:
            last, trigger.last_fire_at = trigger.last_fire_at, now
            trigger.save(update_fields=["last_fire_at"])
            due = due_after(trigger, last, now) if last else now
        else:
            due = due_after(trigger, claim or trigger.created_at, now)
        late = (now - due).total_seconds() > MISSED_GRACE_SECONDS
        if late and trigger.missed == Trigger.Missed.SKIP:
            return TriggerFire.objects.create(
                trigger=trigger, kind=Trigger.Kind.SCHEDULE, scheduled_for=due, received_at=now,
                outcome=TriggerFire.Outcome.SKIPPED,
                reason=f"missed: due at {due.isoformat()}, fired {int((now - due).total_seconds())} s late; rule skip")
    payload = {"scheduled_for": (due if not late else now).isoformat(), "timezone": trigger.timezone,
               "late_seconds": max(0, int((now - due).total_seconds()))}
    try:
        return firing.fire(trigger, kind=Trigger.Kind.SCHEDULE, payload=payload, payload_sha256=digest_json(payload),
                           scheduled_for=due, received_at=now)
    except firing.FireRefused:
        return TriggerFire.objects.filter(trigger=trigger).order_by("-received_at").first()


def fire_due(now=None) -> int:
    """The embedded default's beat (runs.ticker, no broker): fire each enabled schedule trigger
    whose next tick has come; how many fired or were recorded skipped.

    The next tick is the first of the schedule after the trigger's last fire (after its creation
    when it has none), so a tick found late after downtime is one fire, which the missed rule
    decides, as with beat. A paused trigger is not looked at, as beat skips its disabled task."""
    now = now or timezone.now()
    fired = 0
    for trigger in Trigger.objects.filter(kind=Trigger.Kind.SCHEDULE, enabled=True):
        if due_after(trigger, trigger.last_fire_at or trigger.created_at, now) > now:
            continue
        if schedule_fire(trigger.pk, now=now, claim=trigger.last_fire_at) is not None:
            fired += 1
    return fired
