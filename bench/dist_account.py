"""Where a distributed run's time goes: what the processes of scenario 3 spent while a batch ran.

Two sources. From outside, for every timed batch: CPU seconds of the Celery worker processes,
of the PostgreSQL backends serving the bench's database, of Redis and of the driver, and the
broker's commands (Redis counts every command it serves). From inside, for one accounting batch
before the timed ones: the workers' probe (bench.celery_app, BENCH_WORKER_PROBE) counts each
statement and commit, times them, and counts the connections opened.
"""

import json
import os
import time
from pathlib import Path

import psutil

_WRITES = ("INSERT", "UPDATE", "DELETE")


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:  # a process that ended: what it spent is gone with it
        return 0.0
    return times.user + times.system


class Meter:
    """CPU of each group of processes and the broker's commands, read before and after a batch."""

    def __init__(self, *, redis_client, cursor, workers: list):
        self.redis, self.cursor = redis_client, cursor
        self.workers = [psutil.Process(p.pid) for p in workers]
        self.redis_process = psutil.Process(redis_client.info("server")["process_id"])

    def _groups(self) -> dict[str, list]:
        pool = [child for worker in self.workers for child in _children(worker)]
        # The backends of the bench's database, but the driver's own (kept connections: the workers'
        # are kept between tasks, warrant.celery; a backend that ends mid-batch takes its CPU with it).
        self.cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND pid <> pg_backend_pid()")
        backends = []
        for (pid,) in self.cursor.fetchall():
            try:
                backends.append(psutil.Process(pid))
            except psutil.Error:
                pass
        return {"workers": self.workers + pool, "postgres": backends, "redis": [self.redis_process]}

    def read(self) -> dict:
        groups = self._groups()
        return {"processes": {name: {p.pid: _cpu(p) for p in ps} for name, ps in groups.items()},
                "driver": time.process_time(),
                "broker_commands": self.redis.info("stats")["total_commands_processed"]}

    @staticmethod
    def per_run(before: dict, after: dict, runs: int) -> dict:
        """CPU ms of each group and broker commands, per run. A process counts from when it was
        first seen (one that started mid-batch counts from 0)."""
        found = {}
        for name, now in after["processes"].items():
            then = before["processes"].get(name, {})
            found[f"cpu_ms_{name}"] = round(sum(cpu - then.get(pid, 0.0) for pid, cpu in now.items()) / runs * 1000, 2)
        found["cpu_ms_driver"] = round((after["driver"] - before["driver"]) / runs * 1000, 2)
        found["broker_commands"] = round((after["broker_commands"] - before["broker_commands"]) / runs, 2)
        return found


def _children(process: psutil.Process) -> list:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def probe_totals(directory: Path) -> dict:
    """The sum of every pool process's probe file."""
    total: dict = {}
    for path in directory.glob("*.json"):
        _add(total, json.loads(path.read_text()))
    return total


def _add(into: dict, values: dict, sign: int = 1) -> None:
    for key, value in values.items():
        if isinstance(value, dict):
            _add(into.setdefault(key, {}), value, sign)
        else:
            into[key] = into.get(key, 0) + sign * value


def probe_per_run(before: dict, after: dict, runs: int) -> dict:
    """What the probe counted between two readings, per run, as the report shows it."""
    diff: dict = {}
    _add(diff, after)
    _add(diff, before, -1)
    statements = diff.get("statements", {})
    statement_ms = sum(diff.get("statement_ms", {}).values())
    own_writes = sum(diff.get("own_by_kind", {}).get(kind, 0) for kind in _WRITES)
    per = lambda value: round(value / runs, 2)  # noqa: E731
    return {
        "tasks": per(diff.get("tasks", 0)),
        "statements": per(sum(statements.values())),
        "statements_by_kind": {kind: per(n) for kind, n in sorted(statements.items())},
        # Each is a round trip: statements, and the COMMIT that ends a transaction block.
        "round_trips": per(sum(statements.values()) + diff.get("commits", 0)),
        # What must reach the disk: the transaction blocks, and statements that write on their own.
        "write_commits": per(diff.get("commits", 0) + own_writes),
        "connections_opened": per(diff.get("connections", 0)),
        "task_ms": per(diff.get("task_ms", 0.0)),
        "statement_ms": per(statement_ms),
        "commit_ms": per(diff.get("commit_ms", 0.0)),
        "chain_lock_ms": per(diff.get("statement_ms", {}).get("chain lock", 0.0)),
        "python_ms": per(diff.get("task_ms", 0.0) - statement_ms - diff.get("commit_ms", 0.0)),
    }


def probe_environment(directory: Path) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*"):
        stale.unlink()
    return {"BENCH_WORKER_PROBE": str(directory)}


def with_environment(values: dict):
    """Set `values` in os.environ until the block ends (the workers started inside inherit them)."""
    from contextlib import contextmanager

    @contextmanager
    def scope():
        saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return scope()
