"""What the database and the web process guarantee on their own, whatever the application does.

PostgreSQL itself refuses to change receipts and run events (raw SQL included), and a web
process whose database or broker is gone says so: /readyz answers 503 naming the failed
dependency, and the API answers a JSON 503, never a traceback or an HTML page.
"""

import base64
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from runs import services
from runs.receipts import receipt_verify_chain
from tests.services.conftest import check_invariants, start_run
from tests.services.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

REFUSED = [
    ("UPDATE", "runs_receipt", "UPDATE runs_receipt SET body = body || ' '"),
    ("DELETE", "runs_receipt", "DELETE FROM runs_receipt"),
    # CASCADE: review items point at receipts, and a plain TRUNCATE is refused for that alone; with
    # CASCADE only the trigger stands between it and the evidence.
    ("TRUNCATE", "runs_receipt", "TRUNCATE runs_receipt CASCADE"),
    ("UPDATE", "runs_runevent", "UPDATE runs_runevent SET kind = 'tampered'"),
    ("DELETE", "runs_runevent", "DELETE FROM runs_runevent"),
    ("TRUNCATE", "runs_runevent", "TRUNCATE runs_runevent CASCADE"),
]


def _rows() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, run_id, seq, prev_hash, hash, body FROM runs_receipt ORDER BY seq")
        receipts = cursor.fetchall()
        cursor.execute("SELECT id, run_id, seq, step, kind, data::text FROM runs_runevent ORDER BY run_id, seq")
        events = cursor.fetchall()
    return {"receipts": receipts, "events": events}


def _fresh_connection() -> psycopg.Connection:
    database = connection.settings_dict
    return psycopg.connect(host=database["HOST"] or "127.0.0.1", port=database["PORT"] or 5432,
                           user=database["USER"], password=database["PASSWORD"] or None,
                           dbname=database["NAME"], autocommit=True, connect_timeout=5)


def test_receipts_and_events_are_append_only_in_the_database(cluster, fault_agent, scenario):
    for _ in range(2):
        run = start_run({"turns": []})
        services.run_advance(run_id=str(run.id), worker="test-guards")  # the test process is the worker
        run.refresh_from_db()
        assert run.status == "succeeded"
    before = _rows()
    assert len(before["receipts"]) == 2 and len(before["events"]) >= 6, before

    refused_by = {}
    # 1. Another program: a fresh connection of its own, no Django, autocommit.
    with _fresh_connection() as raw:
        for operation, table, sql in REFUSED:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                raw.execute(sql)
            message = str(refused.value)
            assert "append-only" in message and table in message and operation in message, message
            refused_by[(operation, table, "psycopg")] = message
    # 2. Raw SQL through the application's own connection, each inside a savepoint.
    for operation, table, sql in REFUSED:
        with pytest.raises(DatabaseError) as refused:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)
        message = str(refused.value)
        assert "append-only" in message and table in message and operation in message, message
        refused_by[(operation, table, "django")] = message
    assert len(refused_by) == 2 * len(REFUSED)

    assert _rows() == before, "a refused statement changed something"
    assert receipt_verify_chain().valid
    check_invariants(scenario)


# --- readiness and a database that is gone --------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _test_database_url() -> str:
    database = connection.settings_dict
    return f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"


# `manage.py runserver` checks migrations before it serves and exits when the database is down
# (Django's own start-up check, not Warrant's), so the database-down server is Django's same
# threaded WSGI server started directly on the product's WSGI application, as gunicorn would.
WSGI_LAUNCHER = (
    "import sys\n"
    "from django.core.servers.basehttp import run\n"
    "from warrant.wsgi import application\n"
    "run('127.0.0.1', int(sys.argv[1]), application, threading=True)\n"
)


@contextmanager
def web_server(*, database_url: str, broker_url: str, logdir: Path, runserver: bool = True):
    """A real HTTP server subprocess in production mode; killed (its whole group) at the end."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_"))}
    env.update({"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "x", "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
                "WARRANT_RECEIPT_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),  # production needs one
                "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback; production redirects to TLS
                "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url, "PYTHONPATH": str(ROOT)})
    argv = ([PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"] if runserver
            else [PYTHON, "-c", WSGI_LAUNCHER, str(port)])
    log = logdir / f"web-{port}.log"
    with open(log, "ab") as handle:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            if process.poll() is not None:
                raise AssertionError(f"the web server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=120, interval=0.2, what=f"the web server on {port} ({log})")
        yield httpx.Client(base_url=base, timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@pytest.fixture
def live_redis(redis_server):
    """The suite's Redis, started again if an earlier scenario killed it."""
    if not redis_server.process or redis_server.process.poll() is not None:
        redis_server.start()
    return redis_server


def _json(response: httpx.Response) -> dict:
    assert response.headers["content-type"].startswith("application/json"), (response.headers, response.text[:500])
    assert "Traceback" not in response.text and "<html" not in response.text.lower(), response.text[:500]
    return response.json()


def test_readyz_is_ready_with_database_and_broker_up(live_redis, db, client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ready"] is True
    assert body["checks"]["database"]["ok"] is True and body["checks"]["database"]["vendor"] == "postgresql"
    assert body["checks"]["broker"] == {"ok": True, "mode": "external"}


def test_a_real_server_is_ready_with_database_and_broker_up(live_redis, db, logdir):
    with web_server(database_url=_test_database_url(), broker_url=live_redis.url, logdir=logdir) as web:
        response = web.get("/readyz")
        assert response.status_code == 200, response.text
        body = _json(response)
        assert body["ready"] is True and body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]


def test_database_down_readyz_and_api_answer_json_503(live_redis, logdir):
    dead = _free_port()  # nothing listens here
    with web_server(database_url=f"postgres://postgres@127.0.0.1:{dead}/warrant", broker_url=live_redis.url,
                    logdir=logdir, runserver=False) as web:
        assert web.get("/healthz").status_code == 200  # alive, though not ready

        ready = web.get("/readyz")
        assert ready.status_code == 503, ready.text
        body = _json(ready)
        assert body["ready"] is False
        assert body["checks"]["database"]["ok"] is False, body
        assert body["checks"]["broker"]["ok"] is True, body

        for path in ("/api/v1/runs/", "/api/v1/receipts/"):
            response = web.get(path, headers={"Authorization": "Token x"})
            assert response.status_code == 503, (path, response.status_code, response.text[:500])
            error = _json(response)["error"]
            assert error["code"] == "database_unavailable", (path, error)
            assert error["message"] and set(error) >= {"code", "message", "details"}, error
            assert response.headers.get("retry-after") == "5", response.headers


def test_broker_down_readyz_answers_503(live_redis, db, logdir):
    dead = _free_port()  # nothing listens here
    with web_server(database_url=_test_database_url(), broker_url=f"redis://127.0.0.1:{dead}/0",
                    logdir=logdir) as web:
        ready = web.get("/readyz")
        assert ready.status_code == 503, ready.text
        body = _json(ready)
        assert body["ready"] is False
        assert body["checks"]["database"]["ok"] is True, body
        assert body["checks"]["broker"]["ok"] is False and body["checks"]["broker"]["mode"] == "external", body
