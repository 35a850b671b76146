"""Scenario 3: PostgreSQL + our own Redis + real Celery workers (1, then 2), runs fired at once.

Warrant: N runs of the scripted agent are created in one transaction (run_start enqueues after
commit), so all N messages go out at once; timed from that commit until every run's receipt is
sealed (a run's receipt is written in the transaction that ends it). The floor: N Celery chains
of no-op tasks, as many hops per chain as a Warrant run takes (counted from its `claimed`
events), the last hop counting in Redis; same broker, same workers, same Celery settings. A
second floor adds the database: its last hop also makes as many separate commits (INSERTs into
a scratch table) as a run's workers commit writes, counted by the workers themselves in an
accounting batch before the timed ones (bench.celery_app's probe; bench.dist_account).

Every timed batch also records the CPU each group of processes spent on it (workers, PostgreSQL
backends, Redis, the driver) and the broker's commands, per run; the accounting batch adds the
statements, round trips, commits, connections and where a task's time went (statements, commits,
the receipt chain's lock, the rest: Python). Those figures do not depend on the machine's load
the way the rates do.
"""

import os
import time
import uuid
from pathlib import Path

from bench import djangoenv, stack
from bench.common import load_snapshot, record, rotations
from bench.dist_account import Meter, probe_environment, probe_per_run, probe_totals, with_environment
from bench.script import PROMPT


def _db_name(suffix: str) -> str:
    return f"{os.environ.get('BENCH_DB_PREFIX', 'warrant_bench')}_{suffix}"


def run(*, workdir: Path, pg_url: str, redis_port: int, n: int, reps: int, worker_counts=(1, 2)) -> list[dict]:
    logdir = workdir / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    name = _db_name("dist")
    records = []
    # As deployed (docs/operations.md, Deploy): workers keep their database connection between tasks
    # (warrant.celery). The floor's tasks run on the same workers, so both sides have it.
    os.environ["DATABASE_CONN_MAX_AGE"] = "60"
    with stack.redis_server(redis_port, logdir) as broker:
        database = stack.fresh_database(pg_url, name)
        djangoenv.setup(workdir / "dist", database_url=database, broker_url=broker)
        djangoenv.prepare()
        import redis
        from celery import chain
        from django.contrib.auth import get_user_model
        from django.db import connection, transaction

        from bench.celery_app import app, commits_done, done, noop
        from runs.models import Run, RunEvent
        from runs.services import run_start
        from runs.states import TERMINAL

        operator = get_user_model().objects.get(username="operator")
        counter = redis.Redis.from_url(broker)
        cursor = connection.cursor()

        def sealed() -> int:
            # One plain statement a poll (the driver shares the machine's two cores with what it times).
            cursor.execute("SELECT count(*) FROM runs_receipt")
            return cursor.fetchone()[0]

        def fire_warrant() -> float:
            # Created in one transaction, so every run's message is published at its commit: all N are
            # fired at once, and what is timed is the workers' throughput, not the driver's run_start.
            base = sealed()
            batch = transaction.atomic()
            batch.__enter__()
            ids = [run_start(agent_slug=djangoenv.AGENT, input_text=PROMPT, caller=operator)[0].id for _ in range(n)]
            started = time.perf_counter()
            batch.__exit__(None, None, None)
            while sealed() < base + n:
                time.sleep(0.01)
            elapsed = time.perf_counter() - started
            statuses = set(Run.objects.filter(id__in=ids).values_list("status", flat=True))
            assert statuses == {"succeeded"}, statuses
            return elapsed

        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, at timestamptz)")

        def fire_floor(hops: int, commits: int = 0) -> float:
            key = f"bench:floor:{uuid.uuid4().hex}"
            last = commits_done.si(key, commits) if commits else done.si(key)
            started = time.perf_counter()
            for _ in range(n):
                chain(*[noop.si() for _ in range(hops - 1)], last).apply_async()
            while int(counter.get(key) or 0) < n:
                time.sleep(0.005)
            return time.perf_counter() - started

        def workers_up() -> int:
            return len(app.control.ping(timeout=0.5) or [])

        def first_run() -> Run:
            first = run_start(agent_slug=djangoenv.AGENT, input_text=PROMPT, caller=operator)[0]
            stack.wait_for(lambda: Run.objects.get(id=first.id).status in TERMINAL, timeout=120, what="a first run")
            first.refresh_from_db()
            assert first.status == "succeeded", first.status
            return first

        # The accounting batch: one worker with the probe on, n runs. Its write commits per run are
        # the floor's commits.
        probe_dir = workdir / "probe"
        with with_environment(probe_environment(probe_dir)), \
                stack.celery_workers(1, logdir / "probe", ping=workers_up) as processes:
            hops = RunEvent.objects.filter(run_id=first_run().id, kind="claimed").count()
            meter = Meter(redis_client=counter, cursor=cursor, workers=processes)
            before, counted = meter.read(), probe_totals(probe_dir)
            elapsed = fire_warrant()
            outside = Meter.per_run(before, meter.read(), n)
            time.sleep(0.5)  # the probe files are written after each task's last statement
            inside = probe_per_run(counted, probe_totals(probe_dir), n)
        commits = max(1, round(inside["write_commits"]))
        records.append(record("distributed", "warrant, accounting batch, 1 worker", 0, "runs_per_s", n / elapsed,
                              "runs/s", n=n, workers=1, hops=hops, **inside, **outside, **load_snapshot()))

        for workers in worker_counts:
            with stack.celery_workers(workers, logdir / str(workers), ping=workers_up) as processes:
                first_run()  # warms the workers up
                fire_floor(hops, commits)
                meter = Meter(redis_client=counter, cursor=cursor, workers=processes)
                for rep, order in rotations(["warrant", "floor", "floor+db"], reps):
                    for variant in order:
                        load, before = load_snapshot(), meter.read()
                        if variant == "warrant":
                            elapsed = fire_warrant()
                        else:
                            elapsed = fire_floor(hops, commits if variant == "floor+db" else 0)
                        spent = Meter.per_run(before, meter.read(), n)
                        records.append(record("distributed", f"{variant}, {workers} worker{'s' if workers > 1 else ''}",
                                              rep, "runs_per_s", n / elapsed, "runs/s", n=n, workers=workers,
                                              hops=hops, commits=commits, load1=load["load1"], **spent))
        cursor.close()
        from django.db import connections

        connections.close_all()
    stack.drop_database(pg_url, name)
    return records
