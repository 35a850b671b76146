"""A worker keeps its database connection from one task to the next when DATABASE_CONN_MAX_AGE says
so (the deploy sets 60), and a kept connection PostgreSQL dropped is replaced without failing a task.

Celery's Django fixup closes every connection around every task unless told otherwise; warrant.celery
has Django decide instead, as it does around a request (docs/operations.md, Deploy)."""

from django.db import connection

from tests.services.conftest import check_invariants, slow, start_run, wait_status


def _backends() -> dict[int, object]:
    """pid -> backend_start of the other sessions on the test database (the worker's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        return dict(cursor.fetchall())


def _now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_a_worker_keeps_its_connection_between_tasks_and_replaces_a_dropped_one(cluster, fault_agent, scenario):
    cluster.env["DATABASE_CONN_MAX_AGE"] = "60"
    cluster.worker()
    wait_status(start_run({"turns": [[slow(0, "first")]]}), {"succeeded"})
    since = _now()
    for text in ("second", "third"):
        wait_status(start_run({"turns": [[slow(0, text)]]}), {"succeeded"})
    # With a connection per task, each of those two runs would have had a backend of its own.
    assert not [pid for pid, started in _backends().items() if started > since], _backends()

    with connection.cursor() as cursor:  # PostgreSQL drops the worker's kept connections
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
    run = wait_status(start_run({"turns": [[slow(0, "after the drop")]]}), {"succeeded"})
    # The next task found the connection dead before using it (health check) and made a new one:
    # its run was claimed once, not failed and delivered again.
    assert run.events.filter(kind="claimed").count() == 1
    check_invariants(scenario)
