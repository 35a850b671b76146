"""Celery tasks: a few lines each over a service, ids only, stable names."""

import logging
import os

from celery import shared_task
from django.db import InterfaceError, OperationalError

from runs.advance import run_advance
from runs.lease import hand_back, take_sigterm
from runs.reconcile import run_reconcile

logger = logging.getLogger(__name__)


@shared_task(name="runs.run_advance", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_advance_task(self, run_id: str) -> None:
    take_sigterm()  # a warm shutdown lets this run finish its step and hands it back (runs.lease)
    worker = f"{self.request.hostname or 'local'}:{os.getpid()}"
    try:
        run_advance(run_id=run_id, worker=worker)
    except (OperationalError, InterfaceError) as exc:
        # The connection died under the step (a restart, a failover): the step is abandoned, and
        # the run goes back on the queue once the database answers, not a lease later.
        handed = hand_back(run_id, worker)
        logger.warning("run %s: the database failed under its step (%s); %s", run_id, (str(exc).splitlines() or [type(exc).__name__])[0],
                       "handed back to the queue" if handed else "left to its lease")


@shared_task(name="runs.run_reconcile", ignore_result=True)
def run_reconcile_task() -> dict:
    return run_reconcile()
