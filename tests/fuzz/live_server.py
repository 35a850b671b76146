"""The fuzz's own Warrant: a throwaway SQLite database, the demo, and gunicorn on loopback.

The database lives in a temporary directory (DATABASE_URL), migrated, with the demo loaded, a
second operator `operator2` (role operators), API tokens for operator, operator2, approver and admin,
a signed-in session for compliance (SESSION_PERSONAS: a token cannot issue tokens), one tool source
of each kind (TOOL_SOURCES), and what the approver's and compliance's passes act on (DESK): two
runs of the operator's sampled for review and assigned to compliance, two parked on secops'
approval. The server may start only `true` for an mcp_stdio
source and import only tests.tools.pyfuncs for a python one (WARRANT_MCP_STDIO_COMMANDS,
WARRANT_PYTHON_TOOL_MODULES), whatever the fuzzer sends. Gunicorn runs with DJANGO_DEBUG=0,
throttles raised and its request-line limit lifted, so that long generated query strings reach
Django instead of gunicorn's own HTML 414 page.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "warrant-demo"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(data_dir: Path) -> dict[str, str]:
    """The environment of a server whose database and data live in `data_dir` (made here)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        key: value for key, value in os.environ.items()
        # Nothing from the caller's Warrant/Django/Celery setup (the pytest pass sets DEBUG and a
        # fast hasher; `make test-services` sets PostgreSQL and Redis): this server is embedded.
        if not key.startswith(("DJANGO_", "WARRANT_", "DATABASE_", "CELERY_", "SCHEMATHESIS_"))
    }
    env.update({
        "DATABASE_URL": f"sqlite:///{data_dir / 'warrant.sqlite3'}",
        "WARRANT_DATA_DIR": str(data_dir),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "fuzz",
        "WARRANT_RECEIPT_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),  # production needs one
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        # Profiles the fuzzer creates and tests (POST model-profiles/{name}/test/) reach loopback only.
        "WARRANT_MODEL_ALLOWED_HOSTS": "127.0.0.1,localhost",
        # Production refuses loopback for admin-supplied URLs; this server's sources and profiles
        # live there (port 9 refuses), so loopback is the one private network it allows.
        "WARRANT_EGRESS_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128",
        "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback; production redirects to TLS
        "WARRANT_THROTTLE_RUN_CREATE": "100000/min",
        "WARRANT_THROTTLE_APPROVAL_DECIDE": "100000/min",
        "PYTHONUNBUFFERED": "1",
        # Tool sources start programs and import modules: keep the fuzzer's to harmless ones.
        "WARRANT_MCP_STDIO_COMMANDS": "true",
        "WARRANT_PYTHON_TOOL_MODULES": "tests.tools.pyfuncs",
    })
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args[:1])} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


PREPARE = """
import json
from django.core.management import call_command
call_command("migrate", "--noinput", verbosity=0)
call_command("load_demo", verbosity=0)
from django.contrib.auth.models import Group, User
from governance.tokens import token_issue
peer, _ = User.objects.get_or_create(username="operator2")
peer.set_password(%r)
peer.save()
peer.groups.add(Group.objects.get(name="operators"))
from agents.models import Tool
from agents.sources import tool_source_create
tokens = {name: token_issue(user=User.objects.get(username=name), via="command", issued_by="fuzz")[1]
          for name in ("operator", "operator2", "approver", "admin")}
for values in %r:
    tool_source_create(values=values)
# The desk's objects: runs sampled for review (a rule that samples every run, switched off again so
# that the passes' own runs are not) and assigned to compliance, and runs parked on secops' approval.
from review.models import ReviewItem, SamplingRule
from review.records import review_assign
from runs.models import ApprovalRequest
from runs.start import run_start
compliance, operator = User.objects.get(username="compliance"), User.objects.get(username="operator")
rule = SamplingRule.objects.create(name="fuzz-every-run", percentage=100)
for text in %r:
    run_start(agent_slug="crm-assistant", input_text=text, caller=operator)  # run in-process: no broker
rule.enabled = False
rule.save()
for item in ReviewItem.objects.all():
    review_assign(item=item, assignee=compliance, by=compliance)
from django.conf import settings
from django.test import Client
from django.utils.crypto import get_random_string
sessions = {}
for name in %r:
    client = Client()
    client.force_login(User.objects.get(username=name))
    csrf = get_random_string(32)  # Django's CSRF check compares the header with the cookie
    sessions[name] = {"csrf": csrf, "cookies": {settings.SESSION_COOKIE_NAME: client.cookies[
        settings.SESSION_COOKIE_NAME].value, settings.CSRF_COOKIE_NAME: csrf}}
from tests.api.role_matrix import MATRIX, PERSONAS
forbidden = {persona: sorted(operation for operation, row in MATRIX.items() if row[PERSONAS.index(persona)] == 403)
             for persona in %r}
items = [str(pk) for pk in ReviewItem.objects.values_list("pk", flat=True)]
approvals = [str(pk) for pk in ApprovalRequest.objects.filter(status="pending").values_list("pk", flat=True)]
print(json.dumps({"tokens": tokens, "sessions": sessions, "tools": sorted(Tool.objects.values_list("name", flat=True)),
                  "forbidden": forbidden, "review_items": items, "approvals": approvals}))
"""

# Personas that sign in (a session cookie and its CSRF token) instead of sending a token.
SESSION_PERSONAS = ("compliance",)
# The runs the desk's objects come from: two that end sampled for review, two parked on an approval.
DESK_RUNS = ("List all accounts.", "List all accounts.", "Delete the account Initech.", "Delete the account Initech.")

# One tool source of each kind, so that reads, changes and syncs of tool sources meet real rows
# (a generated name almost never names one). Each is as harmless as the server's allow-lists:
# `true` exits at once, port 9 on loopback refuses, the document has no servers to call.
TOOL_SOURCES = [
    {"name": "fuzz-py", "kind": "python", "path": "tests.tools.pyfuncs", "timeout_seconds": 5},
    {"name": "fuzz-stdio", "kind": "mcp_stdio", "command": ["true"], "timeout_seconds": 5},
    {"name": "fuzz-http", "kind": "mcp_http", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 5},
    {"name": "fuzz-doc", "kind": "openapi", "timeout_seconds": 5, "document": {
        "openapi": "3.0.3", "info": {"title": "fuzz", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9/"}],
        "paths": {"/notes/{id}": {"get": {"operationId": "read_note", "summary": "Read a note.", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]}}}}},
]


def prepare_database(env: dict[str, str], personas: list[str]) -> dict:
    """Migrate, load the demo, add the peer, the tokens and the sources, in one interpreter (each start
    of Django costs seconds). Also read there, as it needs Django: the operations the role matrix
    (tests/api/role_matrix.py) refuses each of `personas` with 403, as its rows name them
    (["POST", "trust-proposals/{pk}/confirm/"])."""
    output = _manage(env, "shell", "-c", PREPARE % (PASSWORD, TOOL_SOURCES, DESK_RUNS, SESSION_PERSONAS,
                                                    tuple(personas)))
    prepared = json.loads(output.strip().splitlines()[-1])
    prepared["tool_sources"] = [source["name"] for source in TOOL_SOURCES]
    return prepared


def copy_server_env(env: dict[str, str], data_dir: Path) -> dict[str, str]:
    """The environment of a second server on a copy of the first one's prepared data.

    Same signing key, so the demo's receipts still verify; same tokens, as they live in the copied
    database. Each server's writes stay its own.
    """
    shutil.copytree(env["WARRANT_DATA_DIR"], data_dir)
    return {**env, "DATABASE_URL": f"sqlite:///{data_dir / 'warrant.sqlite3'}", "WARRANT_DATA_DIR": str(data_dir)}


class Server:
    def __init__(self, env: dict[str, str], logs: Path, port: int):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.access_log = logs / "gunicorn-access.log"
        self.error_log = logs / "gunicorn-error.log"
        self.output = open(logs / "server-output.log", "w")  # Django's log (tracebacks of 500s)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "warrant.wsgi", "-b", f"127.0.0.1:{port}",
             "--workers", "2", "--timeout", "120", "--graceful-timeout", "5",
             # Long generated query strings must reach Django, not stop at gunicorn's HTML 414.
             "--limit-request-line", "0",
             "--access-logfile", str(self.access_log), "--error-logfile", str(self.error_log),
             # Method, path, status, and whose token or session: requests per persona are counted from it.
             "--access-logformat", '%(m)s %(U)s %(s)s "%({authorization}i)s" "%({cookie}i)s"'],
            cwd=REPO, env=env, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"gunicorn exited with {self.process.returncode}; see {self.error_log}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"gunicorn did not answer /healthz within {timeout:.0f}s")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait()
        self.output.close()
