"""API clients of the demo's people (the demo loaded into the test database), personas made by
tests/factories.py for tests that need no demo, and the replaying agent."""

import os
from dataclasses import dataclass
from functools import cached_property

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from agents.models import Tool
from runs import witness
from runs.advance import BREAKER
from runs.demo import demo_load
from tests import factories
from tests.security.figures import FIGURES as SECURITY_FIGURES

# The durability suite needs PostgreSQL and a broker; `make test` runs it as a second pass.
collect_ignore = [] if os.environ.get("DATABASE_URL", "").startswith("postgres") else ["services"]
# The fuzzing pass starts its own servers and takes minutes: `make test` runs it on its own
# (`make fuzz`). The fuzz's own unit tests (its rules, the operations it cuts) run with the rest.
if not os.environ.get("WARRANT_FUZZ"):
    collect_ignore.append("fuzz/test_schemathesis.py")
# The benchmarks' smoke run needs their venv and PostgreSQL: `make test` runs it on its own.
if not os.environ.get("WARRANT_BENCH_SMOKE"):
    collect_ignore.append("bench")


def pytest_terminal_summary(terminalreporter):
    if SECURITY_FIGURES:
        terminalreporter.section("security figures")
        for line in SECURITY_FIGURES:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    # In a pytest-xdist worker: hand the figures to the controller, which prints the summary.
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["security_figures"] = list(SECURITY_FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    SECURITY_FIGURES.extend(getattr(node, "workeroutput", {}).get("security_figures", []))


# A test that needs one of these starts a server of its own (pytest-django's live server thread,
# the npm MCP server, installed once): it is marked slow, so `make check` leaves it to `make test`.
SLOW_FIXTURES = {"live_server", "everything_server", "everything_http"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    # The demo once per session: tests in a rolled-back transaction (pytest-django runs them
    # first) find it there; transactional tests flush it and load their own.
    with django_db_blocker.unblock():
        demo_load()


@pytest.fixture
def demo(db):
    if get_user_model().objects.filter(username="operator").exists() and Group.objects.filter(name="secops").exists():
        return {"users_created": [], "policies_created": [], "agent_published": False}
    return demo_load()


@pytest.fixture
def admin_client(client, demo):
    """Django's test client signed in as the demo's superuser "admin" (in place of pytest-django's
    fixture of that name, whose admin is not the demo's)."""
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def _client(username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(username=username))
    return client


@pytest.fixture
def operator(demo):
    return _client("operator")


@pytest.fixture
def approver(demo):
    return _client("approver")


@pytest.fixture
def compliance(demo):
    return _client("compliance")


@pytest.fixture
def admin(demo):
    """The governance admin (also a superuser)."""
    return _client("admin")


@pytest.fixture
def outsider(demo):
    """Logged in, in no role at all."""
    get_user_model().objects.create_user("outsider", password="x")
    return _client("outsider")


@pytest.fixture
def second_operator(demo):
    user = get_user_model().objects.create_user("operator2", password="x")
    user.groups.add(Group.objects.get(name="operators"))
    return _client("operator2")


# --- personas: people made by the factories, for tests that do not need the demo -----------------


@dataclass
class Persona:
    """A user, with an API client and a signed-in test-client session as that user (each made on
    first use: signing in writes a session row)."""

    user: object

    @cached_property
    def api(self) -> APIClient:
        return factories.api_client(self.user)

    @cached_property
    def browser(self) -> Client:
        return factories.browser(self.user)


def _persona(person) -> Persona:
    return Persona(user=person)


@pytest.fixture
def caller(db) -> Persona:
    """May start runs (the operators role)."""
    return _persona(factories.caller())


@pytest.fixture
def secops(db) -> Persona:
    """An approver: a member of the role approval policies name."""
    return _persona(factories.approver())


@pytest.fixture
def compliance_officer(db) -> Persona:
    """Reads every run and receipt."""
    return _persona(factories.compliance_officer())


@pytest.fixture
def governance_admin(db) -> Persona:
    """Changes policies, grants, agents and skills (not a superuser)."""
    return _persona(factories.governance_admin())


@pytest.fixture
def replay_agent(demo):
    """The agent "replayer", whose model follows the script given as the run's input
    (tests/runs/backends.py), carrying every tool registered by dotted path at this point (the
    demo's and any a fixture before it made), published. factories.carry(agent, tool) adds more."""
    return factories.replay_agent(*Tool.objects.filter(source=Tool.Source.PYTHON, tool_source=None))


@pytest.fixture(autouse=True)
def _no_checkpoint_seen():
    """Each test's database starts without the checkpoints an earlier test made: the witness's
    interval clock (runs.witness._last_seen) starts unset too."""
    witness._last_seen[0] = None


@pytest.fixture(autouse=True)
def _no_health_row_trusted():
    """Nor without the model profiles' health rows: the process's breaker (runs.advance.BREAKER)
    trusts none it read in an earlier test."""
    BREAKER.forget()


@pytest.fixture(autouse=True)
def _postgres_flush_allowed(request):
    """Let pytest-django flush the database between transactional tests.

    The append-only triggers refuse TRUNCATE (PostgreSQL) and DELETE (SQLite) on receipts,
    events, checkpoints, approval decisions, review records and trust changes, as they should in
    production. A transactional test's teardown flushes, so just before it this fixture (torn down
    first, since it depends on transactional_db) switches the PostgreSQL session to replica mode,
    which skips ordinary triggers, or drops SQLite's (a test database's schema only); the next test
    restores them.
    """
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker and marker.kwargs.get("transaction")) or "transactional_db" in request.fixturenames
    if not transactional:
        yield
        return
    request.getfixturevalue("transactional_db")
    from django.db import connection

    if connection.vendor == "sqlite":
        from agents import append_only as agents_append_only
        from review import append_only as review_append_only
        from runs import append_only

        sets = (append_only.TRIGGERS, review_append_only.TRIGGERS, agents_append_only.TRIGGERS)
        for triggers in sets:
            triggers.create(connection)
        yield
        for triggers in sets:
            triggers.drop(connection)
        return
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = origin")
    yield
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
