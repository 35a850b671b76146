"""The Celery app, and what a worker does when it starts and when it is asked to stop.

- Warm shutdown (SIGTERM to the worker, a deploy): the runs its processes advance stop after their
  current step and go back to the queue at once (runs.lease.request_shutdown), instead of waiting
  for their lease to lapse. In the prefork pool the task runs in a child process, which Celery's
  signal does not reach: the main process passes it on as SIGTERM, and a child that is advancing a
  run takes SIGTERM as that request (one that is not dies at once, as Celery's children do). A
  process that must stop now is sent SIGKILL, or SIGTERM again (a cold shutdown) more than
  runs.lease.RELAY_SECONDS after the first; its run's lease lapses and the reconciler hands the run
  to another worker within seconds.
- Every worker runs the reconciler on a ticker of its own (runs.ticker), beside beat, so a dead
  worker's runs are taken up even while beat is down.
"""

import os
import signal

from celery import Celery
from celery.signals import (task_postrun, task_prerun, worker_init, worker_process_init, worker_ready,
                            worker_shutting_down)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "warrant.settings")

app = Celery("warrant")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect(weak=False)
@task_postrun.connect(weak=False)
def _connections_as_around_a_request(task=None, **_) -> None:
    """A task is to a worker what a request is to the web process: before and after it, Django
    closes the connections past DATABASE_CONN_MAX_AGE (all of them at the default 0, as Celery
    did) and those that errored and no longer answer; a kept one is health-checked on its next
    use (conn_health_checks), so a restarted PostgreSQL costs a reconnect, not a failed task.
    (CELERY_DB_REUSE_MAX in warrant.celery_config stops Celery closing them all regardless.) Not
    around a task applied eagerly: it runs inside its caller, whose connection (and transaction)
    it shares."""
    from django.db import close_old_connections

    if task is not None and getattr(task.request, "is_eager", False):
        return
    close_old_connections()


@worker_shutting_down.connect
def _hand_runs_back(**_) -> None:
    from runs.lease import request_shutdown

    request_shutdown()
    try:
        from billiard.process import active_children
    except ImportError:  # pragma: no cover  (billiard comes with Celery)
        return
    for child in active_children():
        try:
            os.kill(child.pid, signal.SIGTERM)
        except (ProcessLookupError, TypeError):
            pass


@worker_process_init.connect
def _stop_after_the_step(**_) -> None:
    from runs.lease import in_pool_process

    in_pool_process()  # its tasks take SIGTERM as "stop after this step" (runs.lease.take_sigterm)


@worker_ready.connect
def _start_reconciler(**_) -> None:
    from runs.ticker import start_worker_reconciler

    start_worker_reconciler()


@worker_init.connect(weak=False)
@worker_process_init.connect(weak=False)
def _start_telemetry(**kwargs):
    """Tracing in workers when OTEL_EXPORTER_OTLP_ENDPOINT is set (a no-op otherwise; idempotent)."""
    from warrant import telemetry

    telemetry.setup()
