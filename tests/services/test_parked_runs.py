"""Parked runs outlive the machinery: a run waiting for an approver holds nothing in memory,
so killing every worker, beat and Redis while it waits loses nothing, and any worker resumes it."""

import logging
import time

from agents.models import SentEmail
from runs import services
from runs.models import Receipt, Run
from tests.services.conftest import REPORT, approve, check_invariants, email, start_run, wait_status
from tests.services.processes import wait_for

PARKED_RUNS = 50
# One worker with one pool child: on a 2-core machine (shared with PostgreSQL, beat, the test
# process) a second worker measured no faster, see the note in the 50-run scenario.
WORKERS_AFTER_RESTART = int(__import__("os").environ.get("H2_WORKERS", "1"))


def _started(cluster, start, *args):
    """Start a worker or beat through the cluster and wait until *this* process says it is ready.

    The cluster's own wait_ready looks for "ready." anywhere in the log, but log names repeat from
    test to test within a session (w1-1.log, beat-2.log, ...) and are opened for append, so a line
    an earlier test's process wrote satisfies it at once. Wait for a line written after the start.
    """
    before = {path: path.stat().st_size for path in cluster.logdir.glob("*.log")}
    process = start(*args)
    offset = before.get(process.log, 0)

    def ready():
        tail = process.log.read_bytes()[offset:]
        return b"ready." in tail or b"beat: Starting" in tail

    wait_for(ready, timeout=30, what=f"{process.args[0]} to start ({process.log})")
    return process


def _claims(run: Run) -> list[str]:
    return [e.data["worker"] for e in run.events.filter(kind="claimed").order_by("seq")]


def _host(worker: str) -> str:
    return worker.split(":")[0]


def test_an_approval_decided_while_redis_and_every_worker_are_down(cluster, fault_agent, scenario, caplog):
    _started(cluster, cluster.worker)
    _started(cluster, cluster.beat)
    run = start_run({"turns": [[email("x")]]})
    wait_status(run, {"awaiting_approval"})
    assert SentEmail.objects.count() == 0

    cluster.kill_all()
    cluster.redis.kill()
    REPORT.fault(scenario)

    # The decision commits; the publish after commit fails, is logged, and is not raised.
    caplog.set_level(logging.ERROR, logger="runs.services")
    approval = run.approvals.get(status="pending")
    from django.contrib.auth.models import User

    started = time.monotonic()
    decided = services.approval_decide(approval_id=approval.id, user=User.objects.get(username="approver"), approve=True)
    decide_seconds = time.monotonic() - started
    assert decided.status == "approved"
    assert decide_seconds < 30, f"approving with the broker down blocked for {decide_seconds:.1f}s"
    assert any("could not enqueue run" in r.getMessage() and str(run.id) in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    run.refresh_from_db()
    assert run.status == "queued"  # committed, waiting for the reconciler
    assert SentEmail.objects.count() == 0

    cluster.redis.start()
    _started(cluster, cluster.worker)
    _started(cluster, cluster.beat)
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    assert SentEmail.objects.count() == 1
    scenario["decide_seconds"] = round(decide_seconds, 2)


def test_fifty_parked_runs_survive_a_full_restart(cluster, fault_agent, scenario, capsys, caplog):
    caplog.set_level(logging.ERROR, logger="runs.services")
    _started(cluster, cluster.worker)
    _started(cluster, cluster.beat)
    started = time.monotonic()
    runs = [start_run({"turns": [[email(f"n{i}")]]}) for i in range(PARKED_RUNS)]
    ids = [run.id for run in runs]
    wait_for(lambda: Run.objects.filter(id__in=ids, status="awaiting_approval").count() == PARKED_RUNS,
             timeout=120, interval=0.5, what=f"{PARKED_RUNS} runs to park")
    park_seconds = time.monotonic() - started
    assert SentEmail.objects.count() == 0

    # Everything goes down while they wait: workers, beat, the broker and its contents.
    cluster.kill_all()
    cluster.redis.kill()
    REPORT.fault(scenario)
    cluster.redis.start()
    for _ in range(WORKERS_AFTER_RESTART):
        _started(cluster, cluster.worker)
    _started(cluster, cluster.beat)
    restarted = time.monotonic()

    for run in runs:
        approve(run)
    approved = time.monotonic()
    wait_for(lambda: Run.objects.filter(id__in=ids, status="succeeded").count() == PARKED_RUNS,
             timeout=120, interval=0.5, what=f"{PARKED_RUNS} runs to succeed")
    done = time.monotonic()

    check_invariants(scenario)
    assert Run.objects.filter(id__in=ids, status="succeeded").count() == PARKED_RUNS
    assert Receipt.objects.filter(run_id__in=ids).count() == PARKED_RUNS
    assert SentEmail.objects.count() == PARKED_RUNS
    assert len(set(SentEmail.objects.values_list("subject", flat=True))) == PARKED_RUNS  # one each, none twice
    assert scenario["duplicate_side_effects"] == 0
    timings = {"park_s": round(park_seconds, 1), "restart_s": round(restarted - scenario["fault_at"], 1),
               "approve_s": round(approved - restarted, 1), "approved_to_done_s": round(done - approved, 1),
               "fault_to_done_s": round(done - scenario["fault_at"], 1),
               "failed_publishes": sum("could not enqueue run" in r.getMessage() for r in caplog.records)}
    scenario.update(timings)
    with capsys.disabled():
        print(f"\n{PARKED_RUNS} parked runs, {WORKERS_AFTER_RESTART} worker(s) after restart: {timings}")


def test_a_run_parked_on_one_worker_resumes_on_another(cluster, fault_agent, scenario):
    first = _started(cluster, cluster.worker, "a")
    _started(cluster, cluster.beat)
    run = start_run({"turns": [[email("handover")]]})
    wait_status(run, {"awaiting_approval"})
    parked_by = _claims(run)
    assert parked_by and all(_host(w) == "a@warrant-test" for w in parked_by), parked_by

    first.stop()
    REPORT.fault(scenario)
    assert not first.alive
    _started(cluster, cluster.worker, "b")
    approve(run)
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    claims = _claims(run)
    assert _host(claims[-1]) == "b@warrant-test", claims
    assert _host(claims[-1]) != _host(parked_by[-1]), claims
    assert SentEmail.objects.count() == 1
