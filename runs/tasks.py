"""Celery tasks: a few lines each over a service, ids only, stable names."""

import os

from celery import shared_task

from runs.advance import run_advance
from runs.lease import take_sigterm
from runs.reconcile import run_reconcile


@shared_task(name="runs.run_advance", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_advance_task(self, run_id: str) -> None:
    take_sigterm()  # a warm shutdown lets this run finish its step and hands it back (runs.lease)
    run_advance(run_id=run_id, worker=f"{self.request.hostname or 'local'}:{os.getpid()}")


@shared_task(name="runs.run_reconcile", ignore_result=True)
def run_reconcile_task() -> dict:
    return run_reconcile()
