"""A worker's hold on the run it advances: a short lease, renewed by a heartbeat while it works.

The lease is short (WARRANT["LEASE_SECONDS"], 15 s by default) so that a run whose worker died is
taken up again within seconds: the reconciler re-enqueues a running run whose lease lapsed, and
the next claim takes it over. A step may legitimately take much longer than the lease (a model
that thinks for minutes, a slow tool): while the worker advances the run, a heartbeat thread
renews the lease every WARRANT["HEARTBEAT_SECONDS"] (5 s), and the side effect it is executing
with it (runs.outbox), so a live worker never loses its run and a slow call is never run twice.

The renewal is one conditional UPDATE on (id, lease_owner, status): it renews only a lease this
worker still holds, so it can never take a run back from a worker that took it over. It touches
only lease_expires_at, which the compare-and-set of runs.lifecycle does not hold except in a
claim, where a renewal that lands first rightly makes the takeover fail. One heartbeat thread a
process renews every lease the process holds, on its own database connection (Django's are per
thread), which it closes whenever it holds none.

Graceful shutdown: request_shutdown() (a Celery worker's warm shutdown, or SIGTERM in a pool
process: take_sigterm and warrant.celery) asks every run this process advances to stop after its
current step and go back to the queue at once, instead of waiting for its lease to lapse.

The database going away under a step (PostgreSQL restarted, a failover) abandons the step: its
checkpoint cannot be written on the dead connection. hand_back() then puts the run this worker
still holds back on the queue as soon as the database answers again, on a new connection, so the
step is taken again within seconds of the server's return instead of a lease later (and sends a
queued run's message again when the claim itself failed, instead of leaving it to the reconciler).
"""

import logging
import os
import signal
import threading
import time
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

_shutdown = threading.Event()
# The runs this process is advancing now, by id (a pool process's SIGTERM handler asks how many; the
# reconciler asks whether a run whose lapsed lease names this process is still among them).
_active: Counter = Counter()
_active_lock = threading.Lock()


def lease_seconds() -> float:
    return float(settings.WARRANT.get("LEASE_SECONDS", 15))


def heartbeat_seconds() -> float:
    configured = settings.WARRANT.get("HEARTBEAT_SECONDS")
    # Three renewals per lease unless told otherwise: two may be missed (a busy database, a
    # pause of the process) before the lease lapses.
    return float(configured) if configured else max(lease_seconds() / 3, 0.05)


def request_shutdown(on: bool = True) -> None:
    """This process is going away: runs stop after their current step and are handed back.
    (`on=False` takes the request back: a test that played a shutdown.)"""
    if on:
        _shutdown.set()
    else:
        _shutdown.clear()


# --- SIGTERM in a Celery pool process ---------------------------------------------------------
# Billiard installs its own SIGTERM handler in a pool process after Celery's worker_process_init
# (it exits at once, through SystemExit), so ours is installed when a task starts, and only in a
# pool process: a solo worker's main process keeps Celery's own handler.

RELAY_SECONDS = 2.0  # a second SIGTERM later than this after the first stops a busy pool process at once
_pool_process = False
_first_sigterm: list[float] = []
_previous_handler = None


def in_pool_process() -> None:
    """Called in each Celery pool process as it starts (warrant.celery)."""
    global _pool_process
    _pool_process = True


def take_sigterm() -> None:
    """In a pool process, at the start of a task: SIGTERM while a run is advanced asks it to stop
    after its step (request_shutdown); while none is, it does what it did before."""
    global _previous_handler
    if not _pool_process or threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is not _on_sigterm:
        _previous_handler = current
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum, frame) -> None:
    now = time.monotonic()
    if advancing() and (not _first_sigterm or now - _first_sigterm[0] < RELAY_SECONDS):
        # The first, and the main process's relay of it (which follows at once): the run in hand
        # stops after its step and is released, then the task returns.
        _first_sigterm[:1] = _first_sigterm[:1] or [now]
        request_shutdown()
        return
    previous = _previous_handler if callable(_previous_handler) else None
    signal.signal(signal.SIGTERM, _previous_handler if previous else signal.SIG_DFL)
    if previous is not None:
        previous(signum, frame)  # billiard's: exits through SystemExit
    else:
        os.kill(os.getpid(), signal.SIGTERM)


def shutting_down() -> bool:
    return _shutdown.is_set()


def advancing() -> int:
    """How many runs this process is advancing now."""
    return _active.total()


def advancing_here(run_id) -> bool:
    """Whether this process is advancing the run now (inside a Heartbeat block)."""
    return _active[str(run_id)] > 0


def renew(run_id, worker: str) -> bool:
    """Extend the lease `worker` holds on the run, and its claim on the side effect it executes.
    False if the worker no longer holds the run (another took it over, or it left `running`)."""
    from runs.models import Run, SideEffect

    until = timezone.now() + timedelta(seconds=lease_seconds())
    held = Run.objects.filter(id=run_id, lease_owner=worker, status="running").update(lease_expires_at=until)
    if held:
        SideEffect.objects.filter(run_id=run_id, status=SideEffect.Status.EXECUTING, claimed_by=worker).update(
            claim_expires_at=until)
    return bool(held)


def hand_back(run_id, worker: str, *, within: float | None = None) -> bool:
    """After the database failed under this worker's task: wait (up to `within` seconds, the lease
    by default) for it to answer again, then put the run back on the queue if this worker holds it,
    or send its message again if it is still queued (the claim itself failed, and the message it
    came in is spent). False when there was nothing to hand back (the run moved on, or another
    worker has it) or the database stayed away: the lease lapses, or the queued run's grace period
    passes, and the reconciler sends the run on, as it would have without this.

    Safe whatever the failed step got written: the release is a compare-and-set on this worker's
    lease, read after the failure, so a step whose commit landed before the connection died is
    handed back from where it got to, and a run another worker took over is left to it. A second
    message for a queued run is a no-op for whoever finds it claimed."""
    from core.api_errors import Conflict
    from runs.lifecycle import run_release
    from runs.models import Run
    from runs.queue import enqueue

    # Past the lease there is no point waiting: the reconciler takes the run up by then.
    deadline = time.monotonic() + (lease_seconds() if within is None else within)
    pause = 0.2
    while True:
        connections.close_all()  # the dead connection first; after a failed attempt, its successor
        try:
            run = Run.objects.filter(id=run_id).only("id", "status", "event_seq", "cancel_requested",
                                                     "lease_owner").first()
            if run is not None and run.status == "queued":
                enqueue(run.id)
                return True
            if run is None or run.status != "running" or run.lease_owner != worker:
                return False
            run_release(run, worker)
            return True
        except Conflict:
            return False  # the row moved between the read and the release: someone else has it
        except (OperationalError, InterfaceError):
            if time.monotonic() + pause > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


class Heartbeat:
    """`with Heartbeat(run_id, worker) as beat:` renews the lease until the block ends.

    `beat.lost` becomes True when a renewal finds the run no longer ours. Not started when the
    caller's connection is inside a transaction: the run's row as this process wrote it is then
    not visible to another connection (a test that plays the worker inside its own transaction),
    and a renewal could only miss it.

    The renewals of every run this process holds are made by one thread of the process's, started
    the first time it is needed: a thread per run cost each task a thread's start and a join of
    it at the end (a few ms of wall time on a busy machine, where a run's task takes 30), for a
    step that in most runs is over long before its first renewal is due."""

    def __init__(self, run_id, worker: str, *, every: float | None = None):
        self.run_id, self.worker = run_id, worker
        self.every = every if every is not None else heartbeat_seconds()
        self.lost = False
        self.renewals = 0
        self.due = 0.0

    def __enter__(self) -> "Heartbeat":
        with _active_lock:
            _active[str(self.run_id)] += 1
        if not transaction.get_connection().in_atomic_block:
            _renewer.add(self)
        return self

    def __exit__(self, *exc) -> None:
        _renewer.discard(self)
        with _active_lock:
            _active[str(self.run_id)] -= 1
            if _active[str(self.run_id)] <= 0:
                del _active[str(self.run_id)]


class _Renewer:
    """The process's heartbeat thread: renews each registered lease every `beat.every` seconds.

    Leaving the block only unregisters the beat: a renewal already under way for it finds the
    run released or ended and is dropped, not reported as lost. The thread's database connection
    (Django's are per thread) is closed whenever no lease is held, so an idle process keeps none."""

    def __init__(self):
        self._cond = threading.Condition()
        self._beats: set[Heartbeat] = set()
        self._thread: threading.Thread | None = None

    def add(self, beat: Heartbeat) -> None:
        with self._cond:
            beat.due = time.monotonic() + beat.every
            self._beats.add(beat)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="warrant-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def discard(self, beat: Heartbeat) -> None:
        with self._cond:
            self._beats.discard(beat)
            if not self._beats:
                self._cond.notify()  # the thread lets its connection go now, not at the next due time

    def held(self, beat: Heartbeat) -> bool:
        with self._cond:
            return beat in self._beats

    def _due(self) -> list[Heartbeat]:
        """Wait until a beat is due; those that are."""
        with self._cond:
            while True:
                now = time.monotonic()
                due = [beat for beat in self._beats if beat.due <= now]
                if due:
                    for beat in due:
                        beat.due = now + beat.every
                    return due
                if not self._beats:
                    connections.close_all()  # this thread's connections only
                    self._cond.wait()
                else:
                    self._cond.wait(min(beat.due for beat in self._beats) - now)

    def _loop(self) -> None:
        while True:
            for beat in self._due():
                try:
                    if renew(beat.run_id, beat.worker):
                        beat.renewals += 1
                    elif self.held(beat):
                        beat.lost = True
                        self.discard(beat)
                        logger.warning("run %s: the lease of %s was taken over or ended", beat.run_id, beat.worker)
                except DatabaseError:
                    # A dropped connection or a busy database: the next beat tries on a new connection.
                    logger.warning("run %s: the lease could not be renewed; trying again", beat.run_id, exc_info=True)
                    connections.close_all()


_renewer = _Renewer()


def _after_fork() -> None:
    # A forked process (a Celery pool process) has no heartbeat thread, whatever its parent had.
    global _renewer
    _renewer = _Renewer()


os.register_at_fork(after_in_child=_after_fork)
