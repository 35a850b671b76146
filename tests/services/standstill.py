"""How long a run stood still: the longest gap, after a fault, between two moments it moved.

A run "moves" when its trace grows (a claim, a step saved, its end). Measured on the database's
own timestamps (RunEvent.created_at), from the moment the fault was injected (wall clock of this
machine, which runs the database too) to the first event written after it.
"""

import time

from django.utils import timezone

from runs.models import Run, RunEvent
from tests.services.processes import wait_for


def moved_after(run: Run, since, *, kind: str | None = None, timeout: float) -> float:
    """Seconds from `since` (an aware datetime) to the run's first event after it (of `kind`)."""
    def first():
        events = RunEvent.objects.filter(run=run, created_at__gt=since)
        if kind:
            events = events.filter(kind=kind)
        return events.order_by("seq").values_list("created_at", flat=True).first()

    at = wait_for(first, timeout=timeout, interval=0.2, what=f"run {run.id} to move after the fault")
    return (at - since).total_seconds()


def longest_standstill(runs: list[Run], since) -> float:
    """Across `runs`, the longest gap between consecutive trace events at or after `since`
    (the fault counts as the first moment), up to each run's last event."""
    longest = 0.0
    for run in runs:
        moments = [since, *RunEvent.objects.filter(run=run, created_at__gt=since)
                   .order_by("seq").values_list("created_at", flat=True)]
        gaps = [(b - a).total_seconds() for a, b in zip(moments, moments[1:])]
        longest = max([longest, *gaps])
    return longest


def now():
    return timezone.now()


def owner_of(run: Run) -> str:
    """The node name (w3@warrant-test) of the worker that holds the run now, waiting for one."""
    def owner():
        run.refresh_from_db()
        return run.lease_owner if run.status == "running" and run.lease_owner else ""

    return wait_for(owner, timeout=30, interval=0.05, what=f"run {run.id} to be claimed").split(":")[0]


def pause(seconds: float) -> None:
    time.sleep(seconds)
