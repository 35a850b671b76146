"""Warrant's Celery app, plus the floor's no-op tasks, so both run on the same workers."""

import os

import redis

from warrant.celery import app

_redis = None


@app.task(name="bench.noop", ignore_result=True)
def noop() -> None:
    return None


@app.task(name="bench.done", ignore_result=True)
def done(key: str) -> None:
    """The chain's last hop: count it where the driver can see it."""
    global _redis
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    _redis.incr(key)


@app.task(name="bench.ping", ignore_result=True)
def ping(key: str) -> None:
    done(key)


@app.task(name="bench.commits_done", ignore_result=True)
def commits_done(key: str, commits: int) -> None:
    """The floor with the database in it: as many separate committed INSERTs as a run's transactions."""
    from django.db import connection

    with connection.cursor() as cursor:
        for _ in range(commits):
            cursor.execute("INSERT INTO bench_floor (at) VALUES (now())")  # autocommit: one commit each
    done(key)


# --- The worker's own account of its time (BENCH_WORKER_PROBE=<directory>) -------------------
# Off unless the driver asks for it: a pool process then counts, per task, the statements its
# database connections run (by first word, and whether each was inside a transaction block or a
# transaction of its own), the outermost transactions it commits, and (BENCH_WORKER_CPROFILE=1)
# profiles itself. It writes the totals to <directory>/<pid>.json after every task (and the
# profile at most once a second), because a pool process may be killed at shutdown before any
# exit hook runs.

_probe = {"tasks": 0, "task_ms": 0.0, "statements": {}, "statement_ms": {}, "own_by_kind": {}, "commits": 0,
          "commit_ms": 0.0, "connections": 0}
_profile = None
_last_dump = [0.0]


def _kind(sql: str) -> str:
    upper = sql.lstrip()[:40].upper()
    if "PG_ADVISORY_XACT_LOCK" in sql.upper():
        return "chain lock"  # runs.receipts: the wait for the receipt chain's single writer
    kind = upper.split(None, 1)[0] if upper else "?"
    if kind == "SELECT" and sql.rstrip().upper().endswith("FOR UPDATE"):
        kind = "SELECT FOR UPDATE"
    return kind


def _count_statement(execute, sql, params, many, context):
    import time

    kind = _kind(sql)
    if not context["connection"].in_atomic_block:  # autocommit: the statement is a transaction (and a commit) itself
        _probe["own_by_kind"][kind] = _probe["own_by_kind"].get(kind, 0) + 1
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        if _probe["tasks"] == 1 and os.environ.get("BENCH_WORKER_SQL"):  # one whole run's statements, in order
            with open(os.path.join(os.environ["BENCH_WORKER_PROBE"], f"{os.getpid()}.sql"), "a") as f:
                f.write(f"{'txn' if context['connection'].in_atomic_block else 'own'} {sql[:160]}\n")
        _probe["statements"][kind] = _probe["statements"].get(kind, 0) + 1
        _probe["statement_ms"][kind] = _probe["statement_ms"].get(kind, 0.0) + (time.perf_counter() - started) * 1000


def _counting_commit(commit):
    import time

    def counted():
        started = time.perf_counter()
        try:
            return commit()
        finally:
            _probe["commits"] += 1
            if _probe["tasks"] == 1 and os.environ.get("BENCH_WORKER_SQL"):
                with open(os.path.join(os.environ["BENCH_WORKER_PROBE"], f"{os.getpid()}.sql"), "a") as f:
                    f.write("COMMIT\n")
            _probe["commit_ms"] += (time.perf_counter() - started) * 1000
    return counted


def _probe_connection(sender, connection, **_):
    _probe["connections"] += 1  # each a new PostgreSQL backend (Django opens them lazily)
    if _count_statement not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count_statement)
        connection.commit = _counting_commit(connection.commit)


def _probe_dump() -> None:
    import json
    import time

    out = os.environ["BENCH_WORKER_PROBE"]
    with open(os.path.join(out, f"{os.getpid()}.json"), "w") as f:
        json.dump(_probe, f)
    now = time.monotonic()
    if _profile is not None and now - _last_dump[0] >= 1.0:
        _last_dump[0] = now
        _profile.dump_stats(os.path.join(out, f"{os.getpid()}.prof"))
        _profile.enable()  # dump_stats stops the profiler


if os.environ.get("BENCH_WORKER_PROBE"):
    import time as _time

    from celery.signals import task_postrun, task_prerun, worker_process_init

    @worker_process_init.connect(weak=False)
    def _probe_start(**_):
        global _profile
        from django.db import connections
        from django.db.backends.signals import connection_created

        connection_created.connect(_probe_connection, weak=False)
        for conn in connections.all(initialized_only=True):
            _probe_connection(None, conn)
        if os.environ.get("BENCH_WORKER_CPROFILE"):
            import cProfile

            _profile = cProfile.Profile()
            _profile.enable()

    _started = [0.0]

    @task_prerun.connect(weak=False)
    def _probe_task_start(**_):
        _started[0] = _time.perf_counter()

    @task_postrun.connect(weak=False)
    def _probe_task_end(**_):
        _probe["tasks"] += 1
        _probe["task_ms"] += (_time.perf_counter() - _started[0]) * 1000
        _probe_dump()
