"""Parked runs outlive the machinery: a run waiting for an approver holds nothing in memory,
so killing every worker, beat and Redis while it waits loses nothing, and any worker resumes it."""

import logging
import time
from collections import Counter

from django.contrib.auth.models import User

from agents.models import SentEmail
from runs import services
from runs.models import Receipt, Run
from tests.services.conftest import REPORT, approve, check_invariants, email, start_run, wait_status
from tests.services.processes import wait_for

PARKED_RUNS = 50
# One worker with one pool child. Measured on the 2-core machine (about 10 runs each): two workers
# drain the 50 resumed runs about twice as fast (1.5-3.5 s against 1.5-8 s) but take as much
# longer to start, so from the fault to the last run done they are no faster (6-15 s either way).
WORKERS_AFTER_RESTART = 1


def _wait_all(ids: list, status: str, *, timeout: float) -> None:
    """Wait until every run in `ids` has `status`; on timeout say where the others are."""
    try:
        wait_for(lambda: Run.objects.filter(id__in=ids, status=status).count() == len(ids),
                 timeout=timeout, interval=0.5, what=f"{len(ids)} runs to be {status}")
    except TimeoutError as exc:
        statuses = Counter(Run.objects.filter(id__in=ids).values_list("status", flat=True))
        raise TimeoutError(f"{exc}; statuses now {dict(statuses)}") from None


def _claims(run: Run) -> list[str]:
    return [e.data["worker"] for e in run.events.filter(kind="claimed").order_by("seq")]


def _host(worker: str) -> str:
    return worker.split(":")[0]


def test_an_approval_decided_while_redis_and_every_worker_are_down(cluster, fault_agent, scenario, caplog, capsys):
    cluster.start()
    run = start_run({"turns": [[email("x")]]})
    wait_status(run, {"awaiting_approval"})
    assert SentEmail.objects.count() == 0

    cluster.kill_all()
    cluster.redis.kill()
    REPORT.fault(scenario)

    # The decision commits; the publish after commit fails, is logged, and is not raised.
    caplog.set_level(logging.ERROR, logger="runs.services")
    approval = run.approvals.get(status="pending")
    started = time.monotonic()
    decided = services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=True)
    decide_seconds = time.monotonic() - started
    assert decided.status == "approved"
    assert decide_seconds < 30, f"approving with the broker down blocked for {decide_seconds:.1f}s"
    assert any("could not enqueue run" in r.getMessage() and str(run.id) in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    run.refresh_from_db()
    assert run.status == "queued"  # committed, waiting for the reconciler
    assert SentEmail.objects.count() == 0

    cluster.redis.start()
    cluster.start()
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    assert SentEmail.objects.count() == 1
    scenario["decide_seconds"] = round(decide_seconds, 2)
    with capsys.disabled():
        print(f"\napproval with the broker down returned in {decide_seconds:.2f}s")


def test_fifty_parked_runs_survive_a_full_restart(cluster, fault_agent, scenario, capsys, caplog):
    caplog.set_level(logging.ERROR, logger="runs.services")
    cluster.start()
    started = time.monotonic()
    runs = [start_run({"turns": [[email(f"n{i}")]]}) for i in range(PARKED_RUNS)]
    ids = [run.id for run in runs]
    _wait_all(ids, "awaiting_approval", timeout=120)
    park_seconds = time.monotonic() - started
    assert SentEmail.objects.count() == 0

    # Everything goes down while they wait: workers, beat, the broker and its contents.
    cluster.kill_all()
    cluster.redis.kill()
    REPORT.fault(scenario)
    cluster.redis.start()
    cluster.start(WORKERS_AFTER_RESTART)
    restarted = time.monotonic()

    for run in runs:
        approve(run)
    approved = time.monotonic()
    _wait_all(ids, "succeeded", timeout=120)
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
    first = cluster.worker("a")
    cluster.beat()
    run = start_run({"turns": [[email("handover")]]})
    wait_status(run, {"awaiting_approval"})
    parked_by = _claims(run)
    assert parked_by and all(_host(w) == "a@warrant-test" for w in parked_by), parked_by

    first.stop()
    REPORT.fault(scenario)
    assert not first.alive
    cluster.worker("b")
    approve(run)
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    claims = _claims(run)
    assert _host(claims[-1]) == "b@warrant-test", claims
    assert _host(claims[-1]) != _host(parked_by[-1]), claims
    assert SentEmail.objects.count() == 1
