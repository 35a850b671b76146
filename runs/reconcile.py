"""The reconciler: overdue approval requests escalate or expire, failed notices are sent again, and
lost work goes back on the queue.

Celery beat runs it (runs.run_reconcile) where there is a broker, and so does a ticker in every
worker; without one, the embedded ticker does (runs.ticker). Never a read: looking at a run or a
queue changes nothing.

How soon a dead worker's run moves again: its last lease renewal (runs.lease: every
WARRANT["HEARTBEAT_SECONDS"], 5 s) plus the lease (WARRANT["LEASE_SECONDS"], 15 s) plus at most
one reconciler interval (5 s): about 20 s at most at the defaults, within the 30 s goal.
"""

import os
import socket
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.approvals import approval_escalate_due, approval_expire_due
from runs.models import Run
from runs.notify import remind_expiring
from runs.notify_retry import retry_due
from runs.lease import advancing_here
from runs.queue import embedded_worker_name, enqueue
from runs.states import RunStatus
from runs.witness import witness_catch_up


def run_reconcile(*, queued_grace_seconds: int | None = None, now=None) -> dict:
    """Expire overdue approval requests, escalate those due, and put lost work back on the queue.
    `now`: the clock for the approval requests (tests move it; leases and the queue read the real one).

    A running run whose lease lapsed lost its worker (a live one renews it: runs.lease), unless
    that worker is another process on this host that still runs (an embedded worker, whose step run
    inside a caller's transaction has no heartbeat), or this process while it advances the run. So a
    run this process claimed and then let go of without a checkpoint (its step raised a database
    error, or its hand-on after the claiming write never ran) is taken up again. A run queued for
    longer than the grace period may have lost its message (a broker restart, a flush). Enqueueing either again is safe: the claim is compare-and-set, so a message
    for a run someone owns is a no-op.
    """
    with _one_at_a_time() as ours:
        if not ours:
            return {"skipped": True, "expired_approvals": 0, "escalated_approvals": 0, "reminded_approvals": 0,
                    "notices_retried": None, "lost_leases": 0, "stale_queued": 0, "witness": None}
        return _reconcile(queued_grace_seconds, approvals_now=now)


def _reconcile(queued_grace_seconds: int | None, *, approvals_now=None) -> dict:
    now = timezone.now()
    if queued_grace_seconds is None:
        queued_grace_seconds = settings.WARRANT["QUEUED_GRACE_SECONDS"]
    # Expiry first: a request past its TTL counts as denied, and does not escalate on its way out.
    expired = approval_expire_due(now=approvals_now)
    escalated = approval_escalate_due(now=approvals_now)
    reminded = remind_expiring(now)  # their approvers told once, before they expire
    notices = retry_due(now)  # notices that failed, sent again with backoff (runs.notify_retry)
    lapsed = Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now).values_list("id", "lease_owner")
    lost = [run_id for run_id, owner in lapsed if _orphaned(run_id, owner)]
    # A broker whose queue is empty holds no message for any queued run: one queued for more than
    # a moment (its publish follows its commit by milliseconds) lost its message (a flush, a
    # restart); otherwise only a run queued past the grace period is assumed to have lost it.
    if queued_grace_seconds > LOST_MESSAGE_SECONDS and _broker_queue_empty():
        queued_grace_seconds = LOST_MESSAGE_SECONDS
    stale = list(Run.objects.filter(
        status=RunStatus.QUEUED, status_changed_at__lt=now - timedelta(seconds=queued_grace_seconds),
    ).values_list("id", flat=True))
    for run_id in lost + stale:
        enqueue(run_id)
    # A witness sink that was down when runs sealed is brought up to the chain's head.
    caught_up = witness_catch_up()
    return {"expired_approvals": expired, "escalated_approvals": escalated, "reminded_approvals": reminded,
            "notices_retried": notices, "lost_leases": len(lost),
            "stale_queued": len(stale), "witness": caught_up}


LOST_MESSAGE_SECONDS = 5


def _broker_queue_empty() -> bool:
    """Whether the broker's default queue holds no message now (False when it cannot tell: no
    broker, or one that does not answer). A message a worker has reserved is not in the queue, so
    its run may be re-enqueued too: the claim makes that second message a no-op."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return False
    from celery import current_app

    try:
        with current_app.connection_for_write() as conn, conn.channel() as channel:
            try:
                return channel.queue_declare(queue=current_app.conf.task_default_queue, passive=True).message_count == 0
            except conn.channel_errors:
                return True  # the queue itself is gone (a flushed Redis): nothing in it
    except Exception:  # the broker is down or slow: say nothing, the grace period stands
        return False


@contextmanager
def _one_at_a_time():
    """On PostgreSQL, one reconciler at a time across every process (beat and each worker's
    ticker); a tick that finds another running skips. Elsewhere (SQLite: one host) always ours."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_RECONCILE_LOCK])
        ours = cursor.fetchone()[0]
    try:
        yield ours
    finally:
        if ours:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_RECONCILE_LOCK])


_RECONCILE_LOCK = 0x57524543  # "WREC"


def _orphaned(run_id, owner: str) -> bool:
    """Whether a run whose lease lapsed has no worker left: its owner no longer runs on this host,
    or is this very process and advances the run no more."""
    if owner == embedded_worker_name():
        return not advancing_here(run_id)
    return not _runs_here(owner)


def _runs_here(owner: str) -> bool:
    """Whether the process named host:pid (as the embedded worker names itself) still runs on this host."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
