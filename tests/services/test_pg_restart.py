"""PostgreSQL restarted under load: every run still ends once, with one receipt and no repeated
side effect, and runs move again within seconds of the server being back.

The machine's PostgreSQL is shared with every other test and is never restarted, so these
scenarios run on a server of their own (tests.services.own_postgres): a throwaway cluster,
migrated once per module with the demo loaded into a template database; each scenario gets a
copy of it. The test process (the web side: starting runs, deciding approvals, the invariants)
points its connection at that copy for the scenario's length, and two workers and beat at the
platform's defaults (the lease, its heartbeat, the reconciler) are started against it.

The load: runs taking steps (more runs than workers, so some wait in the queue), one run whose
approved email goes out just before the restart with a slow call after it in the same step, and
one parked for approval across the restart and approved once the server is back. Then
`pg_ctl restart`: `-m fast` (every session ended, a clean shutdown) or `-m immediate` (the
server's processes killed, crash recovery on start). The figures: the longest time a run stood
still from the fault, and from the moment the server answered again (the goal: 30 s).
"""

import contextlib
import time

import pytest
from django.db import connection

from agents.models import SentEmail
from runs.models import Run, SideEffect
from tests.services.conftest import (
    REPORT, Cluster, approve, check_invariants, email, slow, start_run, wait_status,
)
from tests.services.own_postgres import OwnPostgres, unavailable
from tests.services.processes import wait_for
from tests.services.standstill import longest_standstill, moved_after, now
from tests.services.test_broker_and_db_faults import _logs, _wait_succeeded

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=f"no PostgreSQL server of our own: {unavailable()}")

TEMPLATE = "warrant_template"
BOUND = 120  # seconds every run has to end after the restart before the scenario fails (the goal is 30)
STEPPERS = 3  # runs taking quick steps, one more than there are workers


@pytest.fixture(scope="module")
def own_server():
    server = OwnPostgres()
    try:
        server.init().start()
        server.createdb(TEMPLATE)
        server.manage(TEMPLATE, "migrate", "--noinput", "-v", "0")
        server.manage(TEMPLATE, "load_demo")
        yield server
    finally:
        server.destroy()


@contextlib.contextmanager
def _pointed_at(server: OwnPostgres, name: str):
    """This process's default connection on `name` of our server, and back on the suite's after."""
    keys = ("HOST", "PORT", "NAME", "USER", "PASSWORD")
    saved = {key: connection.settings_dict.get(key) for key in keys}
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(server.port), NAME=name, USER="postgres", PASSWORD="")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)


@pytest.fixture
def own_database(own_server, django_db_blocker, request):
    """A copy of the template for this scenario, which this process's connection points at."""
    name = f"scenario_{request.node.callspec.id}"
    url = own_server.createdb(name, template=TEMPLATE)
    with django_db_blocker.unblock(), _pointed_at(own_server, name):
        yield url


@pytest.fixture
def demo(own_database):
    """Overrides tests/conftest.py's `demo` for this module, so the fixtures built on it (the fault
    agent) write to our server's database, where the template already has the demo."""
    return {"users_created": [], "policies_created": [], "agent_published": False}


@pytest.fixture
def own_cluster(redis_server, logdir, own_database):
    if not redis_server.process or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.flushall()
    cluster = Cluster(redis_server, logdir, own_database).at_defaults()
    yield cluster
    cluster.kill_all()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load(mode, own_server, own_cluster, fault_agent, scenario, capsys):
    cluster = own_cluster
    cluster.start(2, beat=False)
    beat = cluster.beat()
    parked = start_run({"turns": [[email("approved after the restart")]], "final": "parked"})
    mailing = start_run({"turns": [[email("sent before the restart"), slow(3, "after the email")]], "final": "mailed"})
    wait_status(parked, {"awaiting_approval"})
    wait_status(mailing, {"awaiting_approval"})
    steppers = [start_run({"turns": [[slow(1, f"s{i}-{t}")] for t in range(8)], "final": f"stepper {i}"})
                for i in range(STEPPERS)]
    approve(mailing)
    # The restart comes while the approved email's step is in its slow call, just after the send.
    wait_for(lambda: SentEmail.objects.count() == 1, timeout=60, what="the approved email to be sent")
    time.sleep(0.5)
    at_fault = dict(Run.objects.values_list("id", "status"))
    fault_at = now()
    REPORT.fault(scenario)
    own_server.restart(mode)
    back_at = now()
    connection.close()  # ours died with the server, as every worker's did

    approve(parked)
    approved_at = now()
    late = start_run({"turns": [[slow(0.2, "late")]], "final": "started after the restart"})
    moving = [mailing, *steppers, late]
    _wait_succeeded(cluster, [*moving, parked], timeout=BOUND)

    scenario["standstill_seconds"] = round(longest_standstill([mailing, *steppers], fault_at), 1)
    scenario["after_restart_seconds"] = round(longest_standstill([mailing, *steppers], back_at), 1)
    scenario["restart_seconds"] = round((back_at - fault_at).total_seconds(), 1)
    parked_still = moved_after(parked, approved_at, kind="claimed", timeout=5)
    check_invariants(scenario)
    with capsys.disabled():
        print(f"\nPostgreSQL restart -m {mode}: down {scenario['restart_seconds']}s; runs running at the fault "
              f"{sorted(at_fault.values()).count('running')}; longest standstill {scenario['standstill_seconds']}s "
              f"from the fault, {scenario['after_restart_seconds']}s from the server back; the parked run claimed "
              f"{parked_still:.1f}s after its approval")

    assert list(at_fault.values()).count("running") >= 1, f"nothing was running when the server went: {at_fault}"
    assert SentEmail.objects.count() == 2
    for effect in SideEffect.objects.all():
        assert (effect.status, effect.attempts) == ("done", 1), (effect.tool, effect.status, effect.attempts)
    assert beat.alive and all(p.alive for p in cluster.processes), _logs(cluster)
    assert "mailed" in Run.objects.get(id=mailing.id).output
