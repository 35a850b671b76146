"""Handing a run to a worker: a Celery message with a broker, the same work in-process without.

Only after commit: a worker must never pick up a run whose row it cannot see yet. With a real
broker a failed publish is logged, not raised: the change it follows is committed, and the
reconciler re-enqueues a queued run whose message never arrived.
"""

import logging
import os
import socket
from functools import partial

from django.conf import settings
from django.db import transaction

from runs.models import Run

logger = logging.getLogger(__name__)


def enqueue(run_id, *, known: Run | None = None) -> None:
    """Advance the run once the current transaction commits. `known`: the run as this process
    just wrote it, whole (snapshot and state loaded); the embedded worker claims it without
    reading it again, and reads it if the row has moved on since."""
    transaction.on_commit(partial(_publish, str(run_id), known), robust=not settings.CELERY_TASK_ALWAYS_EAGER)


def embedded_worker_name() -> str:
    """host:pid, as the embedded worker names itself: a lease's owner is unique across hosts, and
    the reconciler can tell whether a lapsed lease's process still runs here."""
    return f"{socket.gethostname()}:{os.getpid()}"


def claimed_here() -> str | None:
    """The worker to claim a run for in the write that queues it: this process's own, when this
    process advances the run as soon as that write commits, that is in-process (no broker) and
    with no transaction open around the one about to begin (its commit is the real one, and the
    hand-on runs right after it). Else None: the run is queued, and whoever takes it claims it."""
    if settings.CELERY_TASK_ALWAYS_EAGER and transaction.get_autocommit():
        return embedded_worker_name()
    return None


def _publish(run_id: str, known: Run | None) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        # The embedded default has no broker: the run advances here and now, as the task would
        # (Celery's eager apply around these few lines cost as much as one of the run's tools).
        from runs.advance import run_advance

        run_advance(run_id=run_id, worker=embedded_worker_name(), known=known)
        return
    from runs.tasks import run_advance_task

    try:
        run_advance_task.apply_async((run_id,), retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2})
    except Exception:
        logger.exception("could not enqueue run %s; the reconciler will", run_id)
