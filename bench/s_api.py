"""Scenario 4: POST /api/v1/runs/ (queued, not executed) under 32 concurrent clients, against gunicorn,
beside the floor: a trivial authenticated DRF endpoint (bench/api_urls.py) under the same server.

PostgreSQL and our own Redis (the run is enqueued; no worker consumes it), gunicorn with sync
workers and persistent database connections (DATABASE_CONN_MAX_AGE=60) for both endpoints. The
load is 32 asyncio clients, each sending one request per connection (sync workers close them),
for a fixed time; every answer's status is counted.
"""

import asyncio
import json
import os
import time
from pathlib import Path

from bench import djangoenv, stack
from bench.common import percentile, record, rotations
from bench.script import PROMPT

PATHS = {"runs": "/api/v1/runs/", "floor": "/bench/floor/"}


async def _load(port: int, request: bytes, seconds: float, clients: int) -> tuple[list[float], dict]:
    latencies, statuses = [], {}
    deadline = time.perf_counter() + seconds

    async def client():
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            answer = await reader.read()
            writer.close()
            latencies.append(time.perf_counter() - started)
            status = int(answer[9:12]) if answer[:5] == b"HTTP/" else 0
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, statuses | {"elapsed": time.perf_counter() - started}


def _request(port: int, path: str, token: str) -> bytes:
    body = json.dumps({"agent": djangoenv.AGENT, "input": PROMPT}).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Token {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def run(*, workdir: Path, pg_url: str, redis_port: int, port: int, seconds: float, reps: int,
        clients: int = 32, gunicorn_workers: int = 4) -> list[dict]:
    logdir = workdir / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    name = f"{os.environ.get('BENCH_DB_PREFIX', 'warrant_bench')}_api"
    records = []
    with stack.redis_server(redis_port, logdir) as broker:
        database = stack.fresh_database(pg_url, name)
        os.environ["DATABASE_CONN_MAX_AGE"] = "60"
        djangoenv.setup(workdir / "api", database_url=database, broker_url=broker, settings="bench.api_settings")
        djangoenv.prepare()
        from django.contrib.auth import get_user_model
        from django.db import connections

        from governance.tokens import token_issue
        from runs.models import Run

        token = token_issue(user=get_user_model().objects.get(username="operator"), via="command", issued_by="bench")[1]
        connections.close_all()
        with stack.gunicorn(port, gunicorn_workers, logdir, settings="bench.api_settings"):
            for path in PATHS.values():  # warm every worker up
                asyncio.run(_load(port, _request(port, path, token), min(seconds, 1.0), clients))
            for rep, order in rotations(list(PATHS), reps):
                for variant in order:
                    latencies, statuses = asyncio.run(_load(port, _request(port, PATHS[variant], token), seconds, clients))
                    elapsed = statuses.pop("elapsed")
                    ok = statuses.get(201, 0)
                    assert ok and ok == len(latencies), statuses
                    extra = {"clients": clients, "requests": len(latencies), "statuses": statuses,
                             "gunicorn_workers": gunicorn_workers}
                    records.append(record("api", variant, rep, "req_per_s", ok / elapsed, "req/s", **extra))
                    records.append(record("api", variant, rep, "p50_ms", percentile(latencies, 50) * 1000, "ms", **extra))
                    records.append(record("api", variant, rep, "p99_ms", percentile(latencies, 99) * 1000, "ms", **extra))
        queued = set(Run.objects.values_list("status", flat=True).distinct())
        assert queued <= {"queued"}, queued  # created and enqueued, never executed
        connections.close_all()
    stack.drop_database(pg_url, name)
    return records
