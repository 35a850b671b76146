"""The embedded reconciler: without a broker there is no beat, so the web process runs the
reconciler itself, on a daemon thread, every WARRANT["EMBEDDED_RECONCILE_SECONDS"].

Why a thread in the web process: the embedded default (no CELERY_BROKER_URL: Celery eager,
`make run`) is one process and nothing else to start, and its reads must not do the reconciler's
work (a GET changes nothing). warrant.wsgi starts the ticker when it builds the application, so
runserver and gunicorn have it and pytest's in-process clients and live servers (which build
their own handler) do not; tests call runs.reconcile.run_reconcile directly. It is off when a
broker is configured (beat runs the reconciler then) and when the setting is 0. Several web
processes may each tick: the reconciler's writes are compare-and-set, so a second one finds
nothing left to do. A run it takes up advances on this thread, as the embedded worker would.

With a broker, every Celery worker runs the same ticker too (start_worker_reconciler, from
warrant.celery when the worker is ready), every WARRANT["WORKER_RECONCILE_SECONDS"], beside beat:
a run whose worker died is taken up within seconds even while beat is down or being restarted.
Ticks of many workers do not pile up: on PostgreSQL one tick at a time runs (runs.reconcile).

Beat also runs what other apps schedule (a schedule trigger's periodic task); without it, an app
registers that work here (embedded_job, from its AppConfig.ready: runs imports no app above it)
and the embedded ticker runs it after the reconciler. Each job must be safe to run in several
processes at once, as the reconciler is. A worker's ticker does not run them: beat does.
"""

import logging
import random
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)
_started: threading.Thread | None = None
_lock = threading.Lock()
_jobs: dict[str, Callable[[], object]] = {}


def embedded_job(name: str, job: Callable[[], object]) -> None:
    """Run `job` on each tick of the embedded ticker (none with a broker, where beat runs it)."""
    _jobs[name] = job


def run_embedded_jobs() -> dict:
    """One pass of the registered jobs: {name: what it returned, or "failed"}; one failing does not
    stop the others."""
    done = {}
    for name, job in list(_jobs.items()):
        try:
            done[name] = job()
        except Exception:  # a locked database, a bug: the next tick tries again
            logger.exception("the embedded job %s failed; the next tick tries again", name)
            done[name] = "failed"
    return done


def start_embedded_reconciler() -> threading.Thread | None:
    """Start the ticker once per process, if this deployment has no beat; the thread, or None."""
    global _started
    seconds = settings.WARRANT["EMBEDDED_RECONCILE_SECONDS"]
    if not settings.CELERY_TASK_ALWAYS_EAGER or seconds <= 0:
        return None
    with _lock:
        if _started is None or not _started.is_alive():
            _started = threading.Thread(target=_tick_forever, args=(seconds, 0.0, True), name="warrant-reconciler",
                                        daemon=True)
            _started.start()
    return _started


def start_worker_reconciler() -> threading.Thread | None:
    """In a Celery worker's main process: the reconciler's ticker, unless the setting is 0."""
    global _started
    seconds = float(settings.WARRANT.get("WORKER_RECONCILE_SECONDS", 5))
    if settings.CELERY_TASK_ALWAYS_EAGER or seconds <= 0:
        return None
    with _lock:
        if _started is None or not _started.is_alive():
            _started = threading.Thread(target=_tick_forever, args=(seconds, 0.2), name="warrant-reconciler",
                                        daemon=True)
            _started.start()
    return _started


def _tick_forever(seconds: float, jitter: float = 0.0, jobs: bool = False) -> None:
    from runs.reconcile import run_reconcile

    stop = threading.Event()  # never set: the thread ends with its process
    # Workers started together drift apart instead of ticking in step.
    while not stop.wait(seconds * (1 + random.uniform(-jitter, jitter))):
        close_old_connections()
        try:
            done = run_reconcile()
            if (done.get("expired_approvals") or done.get("escalated_approvals") or done.get("lost_leases")
                    or done.get("stale_queued") or any((done.get("notices_retried") or {}).values())):
                logger.info("reconciler: %s", done)
        except Exception:  # a tick that fails (a locked database, a bug) must not end the ticker
            logger.exception("the embedded reconciler's tick failed; the next one tries again")
        try:
            if jobs and (ran := {k: v for k, v in run_embedded_jobs().items() if v}):
                logger.info("embedded jobs: %s", ran)
        finally:
            close_old_connections()
