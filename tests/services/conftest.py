"""The durability suite: real PostgreSQL, a real Redis server, real Celery worker processes.

Run by `make test` with DATABASE_URL pointing at PostgreSQL and CELERY_BROKER_URL at the
suite's own Redis port (see the Makefile). Every scenario ends with check_invariants().

Under pytest-xdist (`make test-services` runs two processes) each xdist worker gwN has a suite of
its own: its Redis server on the broker URL's port + N (the test process and the Celery processes
it starts both use it), its slow service on TEST_SLOW_SERVICE_PORT + N, its log dir, and its test
database (pytest-django names it test_<name>_gwN; the Cluster passes that name on). The figures
each worker records reach the controller, which prints them (pytest_testnodedown).
"""

import contextlib
import io
import itertools
import json
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection

from agents.models import Agent, ModelProfile, Tool
from agents.services import agent_publish
from governance.models import ToolGrant
from runs import services
from runs.models import Run
from tests.services.invariants import REPORT, check_invariants  # noqa: F401  (re-exported for scenarios)
from tests.services.processes import CeleryProcess, RedisServer, wait_for

SUITE_ENV = {
    "WARRANT_LEASE_SECONDS": "5",  # longer than any step the scenarios hold open
    "WARRANT_QUEUED_GRACE_SECONDS": "3",
    "WARRANT_RECONCILE_SECONDS": "1",
    "WARRANT_MAX_DELIVERIES": "3",
    "WARRANT_TIME_SLICE_SECONDS": "5",
}

# The platform's defaults for recovery (warrant/settings.py, docs/operations.md), for the
# scenarios that measure what an operator sees.
# TEST_RECOVERY_LEASE_SECONDS and TEST_RECOVERY_RECONCILE_SECONDS measure the same scenarios
# under other values (the figures before heartbeats were measured with 300 and 15).
DEFAULTS = {
    "WARRANT_LEASE_SECONDS": os.environ.get("TEST_RECOVERY_LEASE_SECONDS", "15"),
    "WARRANT_HEARTBEAT_SECONDS": "5",
    "WARRANT_RECONCILE_SECONDS": os.environ.get("TEST_RECOVERY_RECONCILE_SECONDS", "5"),
    "WARRANT_WORKER_RECONCILE_SECONDS": "5",
}
# A model that takes its time (tests.services.faults.ThinkingBackend), beside the suite's own.
MODEL_BACKENDS = ",".join(filter(None, [os.environ.get("WARRANT_MODEL_BACKENDS", ""),
                                        "thinking=tests.services.faults.ThinkingBackend"]))
# The pytest-xdist worker this process is ("gw1"), or "" outside xdist; its number offsets the
# suite's ports, so the defaults hold when the suite runs in one process (and for gw0).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
XDIST_OFFSET = int(XDIST_WORKER[2:]) if XDIST_WORKER.startswith("gw") else 0
# this suite's loopback range: 7130-7139
SLOW_SERVICE_PORT = int(os.environ.get("TEST_SLOW_SERVICE_PORT", "7130")) + XDIST_OFFSET
PRINTED: list[str] = []  # what scenarios printed with capsys.disabled() in an xdist worker


def pytest_configure(config):
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        raise pytest.UsageError("tests/services needs DATABASE_URL=postgres://… (make test sets it)")
    if settings.CELERY_TASK_ALWAYS_EAGER:
        raise pytest.UsageError("tests/services needs CELERY_BROKER_URL=redis://… (make test sets it)")
    if XDIST_OFFSET:
        _move_broker(XDIST_OFFSET)


def _move_broker(offset: int) -> None:
    """This worker's broker: the configured Redis port + offset, for the runs the test process
    starts (settings and the Celery app, before anything connected) and, through the environment
    and the Cluster, for the processes it starts."""
    from warrant.celery import app

    parts = urlsplit(settings.CELERY_BROKER_URL)
    url = parts._replace(netloc=f"{parts.hostname}:{parts.port + offset}").geturl()
    settings.CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"] = url
    app.conf.broker_url = url


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> Path:
    configured = os.environ.get("WARRANT_SERVICES_LOGDIR")
    # tmp_path_factory is per xdist worker already; a configured dir gets a subdirectory per worker.
    path = Path(configured) / XDIST_WORKER if configured else tmp_path_factory.mktemp("services-logs")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def redis_server(logdir):
    port = int(settings.CELERY_BROKER_URL.rsplit(":", 1)[1].split("/")[0])
    server = RedisServer(port, logdir)
    server.start()
    yield server
    server.kill()


_SEQUENCE = itertools.count(1)  # process numbers unique across the session, so log files never collide


class Cluster:
    """Start, kill and restart the worker side; the test process is the web side."""

    def __init__(self, redis_server: RedisServer, logdir: Path, database_url: str):
        self.redis, self.logdir = redis_server, logdir
        self.env = {**os.environ, **SUITE_ENV, "DJANGO_DEBUG": "1", "DATABASE_URL": database_url,
                    "WARRANT_MODEL_BACKENDS": MODEL_BACKENDS,
                    "CELERY_BROKER_URL": redis_server.url, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        self.processes: list[CeleryProcess] = []

    def at_defaults(self) -> "Cluster":
        """Workers and beat started after this use the platform's defaults for the lease, its
        heartbeat and the reconciler (DEFAULTS, named explicitly so the figures say what they
        were measured with), not the suite's short ones: what an operator would see."""
        for name in ("WARRANT_QUEUED_GRACE_SECONDS", *DEFAULTS):
            self.env.pop(name, None)
        self.env.update(DEFAULTS)
        return self

    def worker(self, name: str | None = None, *, ready: bool = True) -> CeleryProcess:
        number = next(_SEQUENCE)
        name = name or f"w{number}"
        return self._start(["worker", "-n", f"{name}@warrant-test", "-c", "1", "-P", "prefork", "-l", "info",
                            "--without-gossip", "--without-mingle", "--without-heartbeat"],
                           self.logdir / f"{name}-{number}.log", ready)

    def beat(self, *, ready: bool = True) -> CeleryProcess:
        number = next(_SEQUENCE)
        schedule = self.logdir / f"beat-{number}.schedule"
        return self._start(["beat", "-s", str(schedule), "-l", "info"], self.logdir / f"beat-{number}.log", ready)

    def start(self, workers: int | list[str] = 1, *, beat: bool = True) -> list[CeleryProcess]:
        """Workers (named, or this many) and beat, started at once and then waited for: each is a
        Django process setting itself up for seconds, and their start-ups overlap instead of adding
        up. Returns the workers."""
        names = workers if isinstance(workers, list) else [None] * workers
        started = [self.worker(name, ready=False) for name in names] + ([self.beat(ready=False)] if beat else [])
        for process in started:
            process.wait_ready()
        return started[:len(names)]

    def _start(self, args: list[str], log: Path, ready: bool) -> CeleryProcess:
        process = CeleryProcess(args, self.env, log).start()
        self.processes.append(process)  # before the wait: one that never gets ready is killed too
        if ready:
            process.wait_ready()
        return process

    def kill_all(self) -> None:
        for process in self.processes:
            process.kill()

    def stop_all(self) -> None:
        for process in self.processes:
            process.stop()
        self.processes.clear()


@pytest.fixture
def cluster(redis_server, logdir, demo, transactional_db):
    """A clean broker and the demo; the scenario starts the workers it needs."""
    if not redis_server.process or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.flushall()
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    dj_database_url.parse(url)  # fail here, clearly, on a name the URL cannot carry
    cluster = Cluster(redis_server, logdir, url)
    yield cluster
    cluster.kill_all()


@pytest.fixture
def fault_agent(demo):
    """An agent driven by a replayed script, with the demo tools plus fault tools."""
    operators = Group.objects.get(name="operators")
    tools = []
    for name, handler in [("slow_echo", "tests.services.faults.slow_echo"), ("poison", "tests.services.faults.poison")]:
        tool = Tool.objects.create(name=name, description=f"test tool {name}", handler=handler,
                                   input_schema={"type": "object"})
        ToolGrant.objects.create(role=operators, tool=tool)
        tools.append(tool)
    profile = ModelProfile.objects.create(name="replay", backend="replay", model="replay-1")
    agent = Agent.objects.create(slug="faulty", name="Faulty", instructions="Follow the script.", model_profile=profile)
    agent.tools.set([*Tool.objects.filter(name__in=["send_email", "list_accounts"]), *tools])
    agent_publish(agent=agent)
    return agent


@pytest.fixture
def thinking_agent(fault_agent):
    """The fault agent's tools, with a model that is slow when the script says so."""
    profile = ModelProfile.objects.create(name="thinking", backend="thinking", model="thinking-1", read_timeout=600)
    agent = Agent.objects.create(slug="thinking", name="Thinking", instructions="Follow the script.", model_profile=profile)
    agent.tools.set(fault_agent.tools.all())
    agent_publish(agent=agent)
    return agent


@pytest.fixture
def slow_service(demo):
    """A loopback HTTP service (tests.services.slow_service) as an OpenAPI tool source whose two
    POST operations are granted to operators (side effects: each call needs an approval), and an
    agent "acts" that has them."""
    from agents.sources import tool_source_create, tool_source_sync
    from tests.services.slow_service import DOCUMENT, SlowService

    service = SlowService(SLOW_SERVICE_PORT).start()
    source = tool_source_create(values={"name": "slowsvc", "kind": "openapi", "document": DOCUMENT,
                                        "base_url": service.url, "timeout_seconds": 600})
    tool_source_sync(source=source)
    operators = Group.objects.get(name="operators")
    tools = list(Tool.objects.filter(tool_source=source))
    for tool in tools:
        tool.enabled = True
        tool.save()
        ToolGrant.objects.create(role=operators, tool=tool)
    profile = ModelProfile.objects.get_or_create(name="replay", backend="replay", model="replay-1")[0]
    agent = Agent.objects.create(slug="acts", name="Acts", instructions="Follow the script.", model_profile=profile)
    agent.tools.set(tools)
    agent_publish(agent=agent)
    yield service
    service.stop()


def act(kind: str, what: str) -> dict:
    return {"name": f"slowsvc__act_{kind}", "arguments": {"body": {"what": what}}}


def start_run(script: dict, *, agent: str = "faulty", user: str = "operator") -> Run:
    run, _ = services.run_start(agent_slug=agent, input_text=json.dumps(script),
                                caller=User.objects.get(username=user))
    return run


def wait_status(run: Run, statuses: set[str], *, timeout: float = 60) -> Run:
    def reached():
        run.refresh_from_db()
        return run.status in statuses

    wait_for(reached, timeout=timeout, interval=0.2, what=f"run {run.id} to reach {sorted(statuses)}")
    return run


def wait_event(run: Run, kind: str, *, count: int = 1, timeout: float = 30) -> None:
    wait_for(lambda: run.events.filter(kind=kind).count() >= count, timeout=timeout, interval=0.05,
             what=f"{count} {kind} event(s) of run {run.id}")


def approve(run: Run, *, user: str = "approver", approve: bool = True) -> None:
    approval = run.approvals.get(status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username=user), approve=approve,
                             reason="" if approve else "not this one")


def email(subject: str) -> dict:
    return {"name": "send_email", "arguments": {"to": "dana.whitfield@example.com", "subject": subject, "body": "Hi"}}


def slow(seconds: float, text: str = "") -> dict:
    return {"name": "slow_echo", "arguments": {"seconds": seconds, "text": text}}


def pytest_terminal_summary(terminalreporter):
    if REPORT.rows or PRINTED:
        terminalreporter.write_sep("=", "durability figures")
        for line in PRINTED:
            terminalreporter.write_line(line)
        for line in REPORT.lines() if REPORT.rows else []:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    # In a pytest-xdist worker: hand the figures to the controller, which prints them.
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["durability_rows"] = json.loads(json.dumps(REPORT.rows, default=str))
        session.config.workeroutput["durability_printed"] = list(PRINTED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", {})
    REPORT.rows.extend(output.get("durability_rows", []))
    PRINTED.extend(output.get("durability_printed", []))


class _RelayedCapsys:
    """capsys in an xdist worker, whose stdout xdist drops: what a scenario prints with
    capsys.disabled() (its figures) is kept for the controller's summary instead."""

    def __init__(self, capsys):
        self._capsys = capsys

    def __getattr__(self, name):
        return getattr(self._capsys, name)

    @contextlib.contextmanager
    def disabled(self):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            yield
        PRINTED.extend(line for line in buffer.getvalue().splitlines() if line.strip())


@pytest.fixture
def capsys(capsys):
    return _RelayedCapsys(capsys) if XDIST_WORKER else capsys


@pytest.fixture
def scenario(request):
    """Names the scenario in the report; the test records its recovery time through it."""
    started = time.monotonic()
    row = REPORT.begin(request.node.name)
    yield row
    row.setdefault("seconds", round(time.monotonic() - started, 1))
