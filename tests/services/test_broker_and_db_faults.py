"""The broker and the database fail under a running step; every run still ends once, with one
receipt and no repeated side effect.

Redis on the suite's port keeps nothing on disk, so killing it or flushing it loses every
message it held (queued, reserved, unacknowledged): the reconciler, driven by beat, is what
puts the runs back on the queue. A terminated PostgreSQL connection abandons the step (an
infrastructure error, not the run's); its worker hands the run back once it has a connection again
(runs.lease.hand_back), and the step is taken again.
"""

import time

from django.db import connection

from agents.models import SentEmail
from runs.models import Run, RunEvent, SideEffect
from tests.services.conftest import REPORT, approve, check_invariants, email, slow, start_run, wait_event, wait_status
from tests.services.processes import wait_for

TERMINATE_OTHER_BACKENDS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def _terminate_worker_connections() -> int:
    """Cut every connection to the test database but this process's own; return how many."""
    with connection.cursor() as cursor:
        cursor.execute(TERMINATE_OTHER_BACKENDS)
        return sum(1 for (terminated,) in cursor.fetchall() if terminated)


def _logs(cluster) -> str:
    """The tails of this scenario's worker and beat logs, for a failure message."""
    tails = []
    for process in cluster.processes:
        text = process.log.read_text(errors="replace") if process.log.exists() else ""
        tails.append(f"--- {process.log} (alive={process.alive})\n" + "\n".join(text.splitlines()[-40:]))
    return "\n".join(tails)


def _wait_succeeded(cluster, runs: list[Run], *, timeout: float) -> None:
    try:
        for run in runs:
            wait_status(run, {"succeeded"}, timeout=timeout)
    except TimeoutError as exc:
        states = list(Run.objects.values_list("id", "status", "step", "deliveries", "lease_owner"))
        raise AssertionError(f"{exc}\nruns: {states}\n{_logs(cluster)}") from exc
    for run in runs:
        assert run.status == "succeeded", (run.id, run.status, run.error, run.error_message)


# --- Redis ------------------------------------------------------------------------------


def test_redis_kill_9_mid_step_then_restarted(cluster, fault_agent, scenario):
    cluster.worker("rkill")
    beat = cluster.beat()
    run = start_run({"turns": [[slow(3, "one")], [slow(3, "two")], [slow(3, "three")]], "final": "all three"})
    wait_event(run, "claimed")
    time.sleep(0.5)  # inside the first slow step
    cluster.redis.kill()
    REPORT.fault(scenario)
    # Keep the broker down past the end of the time slice: the worker releases the run to
    # `queued` and its re-enqueue cannot reach Redis. Record what the run goes through meanwhile.
    seen = set()
    down_until = time.monotonic() + 9
    while time.monotonic() < down_until:
        seen.add(Run.objects.values_list("status", flat=True).get(id=run.id))
        time.sleep(0.1)
    cluster.redis.start()  # empty: the message of the released run is gone
    _wait_succeeded(cluster, [run], timeout=90)
    check_invariants(scenario)
    assert "queued" in seen, f"the fault did not hit the re-enqueue as intended: statuses while down {seen}"
    assert run.events.filter(kind="claimed").count() >= 2
    assert beat.alive, _logs(cluster)
    assert "all three" in run.output


def test_run_started_while_redis_is_down(cluster, fault_agent, scenario):
    """The web side's enqueue after commit cannot reach the broker: the run is kept, queued,
    the request is not failed or held up, and the reconciler sends it once Redis is back."""
    cluster.start(["rdown"])
    cluster.redis.kill()
    REPORT.fault(scenario)
    began = time.monotonic()
    run = start_run({"turns": [[slow(0.5, "late")]], "final": "after the outage"})
    blocked = time.monotonic() - began
    assert Run.objects.get(id=run.id).status == "queued"
    assert blocked < 10, f"starting a run waited {blocked:.1f}s on a dead broker"
    time.sleep(2)
    cluster.redis.start()
    _wait_succeeded(cluster, [run], timeout=90)
    check_invariants(scenario)
    assert "after the outage" in run.output


def test_redis_flushall_while_runs_are_queued_and_running(cluster, fault_agent, scenario):
    cluster.start(["rflush"])
    runs = [start_run({"turns": [[slow(2, f"r{i}-a")], [slow(1, f"r{i}-b")]], "final": f"run {i}"})
            for i in range(3)]
    wait_for(lambda: RunEvent.objects.filter(kind="claimed").exists(), timeout=30, what="a first claim")
    time.sleep(0.5)  # one run is inside its first slow step, the other two wait in the queue
    statuses = dict(Run.objects.values_list("id", "status"))
    queued_messages = cluster.redis.client().llen("celery")
    assert list(statuses.values()).count("queued") >= 1, statuses
    assert queued_messages >= 1, "nothing in the broker to lose"
    cluster.redis.flushall()
    REPORT.fault(scenario)
    # The queued messages are gone. (Not every key: a live worker writes its own, such as kombu's
    # bindings and unacked, again within moments of the flush.)
    assert cluster.redis.client().llen("celery") == 0
    _wait_succeeded(cluster, runs, timeout=90)
    check_invariants(scenario)
    for i, run in enumerate(runs):
        assert f"run {i}" in run.output


# --- PostgreSQL -------------------------------------------------------------------------


def test_worker_database_connection_terminated_mid_step(cluster, fault_agent, scenario):
    cluster.start(["pgterm"])
    run = start_run({"turns": [[slow(3, "first")], [slow(0.1, "second")]], "final": "both"})
    wait_event(run, "claimed")
    time.sleep(0.5)  # inside the slow step, the worker's connection idle under it
    terminated = _terminate_worker_connections()
    REPORT.fault(scenario)
    assert terminated >= 1, "the worker held no database connection to cut"
    _wait_succeeded(cluster, [run], timeout=60)
    check_invariants(scenario)
    assert run.events.filter(kind="claimed").count() >= 2, "the step whose connection died was not taken again"
    assert "first" in run.output and "second" in run.output


def test_worker_database_connection_terminated_mid_approved_email_batch(cluster, fault_agent, scenario):
    cluster.start(["pgmail"])
    run = start_run({"turns": [[email("x"), slow(3, "after the email")]]})
    wait_status(run, {"awaiting_approval"})
    approve(run)
    wait_event(run, "claimed", count=2)
    # The email goes out (committed with its outbox row), then the connection dies inside the
    # slow call of the same batch: the step cannot be checkpointed and is taken again.
    wait_for(lambda: SentEmail.objects.count() == 1, timeout=20, what="the email to be sent")
    time.sleep(0.3)
    terminated = _terminate_worker_connections()
    REPORT.fault(scenario)
    assert terminated >= 1, "the worker held no database connection to cut"
    _wait_succeeded(cluster, [run], timeout=60)
    check_invariants(scenario)
    assert SentEmail.objects.count() == 1
    effect = SideEffect.objects.get(run=run)
    assert (effect.status, effect.attempts) == ("done", 1)
    assert run.events.filter(kind="claimed").count() >= 3, "the batch whose connection died was not taken again"
