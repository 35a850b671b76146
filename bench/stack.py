"""The real services of scenarios 3 and 4: a Redis server of our own, a PostgreSQL database of our
own on the machine's server, Celery workers and gunicorn, each a real process we start and stop."""

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def wait_for(check, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up in {timeout} s")


def _stop(process: subprocess.Popen, timeout: float = 15) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(port: int, logdir: Path):
    import redis

    log = open(logdir / f"redis-{port}.log", "wb")
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        wait_for(client.ping, timeout=10, what=f"redis on {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(process)
        log.close()


def fresh_database(server_url: str, name: str) -> str:
    """Drop and create database `name` on the server of `server_url`; its URL."""
    import psycopg

    parts = urlparse(server_url)
    admin = urlunparse(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parts._replace(path=f"/{name}"))


def drop_database(server_url: str, name: str) -> None:
    import psycopg

    admin = urlunparse(urlparse(server_url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def celery_workers(count: int, logdir: Path, *, ping):
    """`count` worker processes (one execution slot each, as `celery worker -c 1`); yields their
    main processes (each has one pool process, its child)."""
    processes = []
    logdir.mkdir(parents=True, exist_ok=True)
    try:
        for i in range(count):
            log = open(logdir / f"worker-{count}-{i}.log", "wb")
            processes.append((subprocess.Popen(
                [str(BIN / "celery"), "-A", "bench.celery_app", "worker", "-c", "1", "-P", "prefork",
                 "-n", f"bench{i}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
                 "-l", "WARNING"], cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT), log))
        # Generous: on a loaded machine a worker's start (Django, the app's imports) took over a minute.
        wait_for(lambda: ping() >= count, timeout=240, what=f"{count} celery workers")
        yield [process for process, _log in processes]
    finally:
        for process, log in processes:
            _stop(process, timeout=30)
            log.close()


@contextmanager
def gunicorn(port: int, workers: int, logdir: Path, *, settings: str):
    import httpx

    log = open(logdir / f"gunicorn-{port}.log", "wb")
    env = _env() | {"DJANGO_SETTINGS_MODULE": settings}
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "warrant.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}",
         "--backlog", "2048", "--log-level", "warning"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200,
                 timeout=60, what="gunicorn")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)
        log.close()
