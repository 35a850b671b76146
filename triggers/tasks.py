"""Celery tasks over the triggers' services: ids in, nothing returned."""

from celery import shared_task


@shared_task(name="triggers.fire_schedule")
def fire_schedule(trigger_id: int) -> None:
    """Sent by beat for a schedule trigger's periodic task (triggers.schedules)."""
    from triggers.schedules import schedule_fire

    schedule_fire(trigger_id)


@shared_task(name="triggers.drain")
def drain_queued() -> None:
    """Start the queued fires whose trigger's last run has ended (beat, every few seconds)."""
    from triggers.firing import drain

    drain()
