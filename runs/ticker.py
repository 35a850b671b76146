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
"""

import logging
import threading

from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)
_started: threading.Thread | None = None
_lock = threading.Lock()


def start_embedded_reconciler() -> threading.Thread | None:
    """Start the ticker once per process, if this deployment has no beat; the thread, or None."""
    global _started
    seconds = settings.WARRANT["EMBEDDED_RECONCILE_SECONDS"]
    if not settings.CELERY_TASK_ALWAYS_EAGER or seconds <= 0:
        return None
    with _lock:
        if _started is None or not _started.is_alive():
            _started = threading.Thread(target=_tick_forever, args=(seconds,), name="warrant-reconciler", daemon=True)
            _started.start()
    return _started


def _tick_forever(seconds: float) -> None:
    from runs.reconcile import run_reconcile

    stop = threading.Event()  # never set: the thread ends with its process
    while not stop.wait(seconds):
        close_old_connections()
        try:
            done = run_reconcile()
            if done["expired_approvals"] or done["lost_leases"] or done["stale_queued"]:
                logger.info("reconciler: %s", done)
        except Exception:  # a tick that fails (a locked database, a bug) must not end the ticker
            logger.exception("the embedded reconciler's tick failed; the next one tries again")
        finally:
            close_old_connections()
