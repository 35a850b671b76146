"""The Celery settings, moved out of warrant/settings.py (which star-imports them, so they are
Django settings as before and `app.config_from_object("django.conf:settings", namespace="CELERY")`
reads them unchanged). All from the environment.
"""

import os

# No broker configured = the embedded default: tasks run in-process, in order, right after
# the transaction that enqueued them commits.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
if not CELERY_BROKER_URL:
    CELERY_BROKER_URL = "memory://"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
# Workers keep our LOGGING (JSON lines with the run id) instead of replacing the root logger's handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A message is acknowledged only after the step finished, and a worker that dies mid-step
# gives it back: the compare-and-set claim makes the redelivery a no-op when work was done.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# With the lease heartbeat (runs.lease) a step may legitimately take minutes (a slow model or tool call).
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("WARRANT_TASK_SOFT_TIME_LIMIT", "900"))
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 30
# Longer than the longest task, so Redis does not hand an unacked message to a second worker while the first
# still runs it (a second delivery would be a no-op anyway: the claim is compare-and-set on a renewed lease). It
# plays no part in recovery: a dead worker's run is re-enqueued by the reconciler once its short lease lapses.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 4}
# Celery's Django fixup closes every database connection before and after each task unless this
# is set, whatever DATABASE_CONN_MAX_AGE says: a new PostgreSQL backend for every task (about a
# connection's setup per run in the bench's distributed scenario). Set, it would keep them for this
# many tasks whatever their state; warrant.celery asks Django instead, as Django does around a
# request (close_old_connections: the age limit, and a connection that errored is checked or
# dropped). So the count here only has to be out of reach.
CELERY_DB_REUSE_MAX = 2**62

CELERY_BEAT_SCHEDULE = {
    "warrant-reconcile": {
        "task": "runs.run_reconcile",
        "schedule": float(os.environ.get("WARRANT_RECONCILE_SECONDS", "5")),
    },
    # Queued trigger fires (concurrency "queue") start once their trigger's last run has ended.
    "warrant-triggers-drain": {
        "task": "triggers.drain",
        "schedule": float(os.environ.get("WARRANT_TRIGGER_DRAIN_SECONDS", "5")),
    },
}
# Beat reads its schedule from the database (django-celery-beat): the static entries above are
# written there when beat starts, and triggers (triggers/schedules.py) add their own periodic tasks.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"


__all__ = [
    "CELERY_ACCEPT_CONTENT",
    "CELERY_BEAT_SCHEDULE",
    "CELERY_BEAT_SCHEDULER",
    "CELERY_BROKER_TRANSPORT_OPTIONS",
    "CELERY_BROKER_URL",
    "CELERY_DB_REUSE_MAX",
    "CELERY_RESULT_SERIALIZER",
    "CELERY_TASK_ACKS_LATE",
    "CELERY_TASK_ALWAYS_EAGER",
    "CELERY_TASK_EAGER_PROPAGATES",
    "CELERY_TASK_IGNORE_RESULT",
    "CELERY_TASK_REJECT_ON_WORKER_LOST",
    "CELERY_TASK_SERIALIZER",
    "CELERY_TASK_SOFT_TIME_LIMIT",
    "CELERY_TASK_TIME_LIMIT",
    "CELERY_WORKER_HIJACK_ROOT_LOGGER",
    "CELERY_WORKER_PREFETCH_MULTIPLIER",
]
