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
