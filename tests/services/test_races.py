"""Races between people and processes on the same run: each decision lands exactly once.

Every racer here is a real thread of the test (web) process with its own PostgreSQL connection,
released on a barrier so the statements really meet in the database; the workers are real
Celery processes. Each scenario repeats its race for several rounds and ends with the invariants.
"""

import json
import random
import threading
from collections import Counter
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import SentEmail
from governance.api_errors import Conflict
from runs import services
from runs.models import ApprovalRequest, Receipt, Run, RunEvent, SideEffect
from runs.receipts import GENESIS, receipt_verify_chain
from runs.states import TERMINAL
from tests.services.conftest import SUITE_ENV, check_invariants, email, start_run, wait_status
from tests.services.processes import wait_for

ROUNDS = 10


def race(*calls, on_release=None, timeout: float = 60) -> list[tuple[str, object]]:
    """Run each call in its own thread, all released together; ("ok", value) or ("error", exc) each.

    A thread connects (and does its slow set-up) before the barrier, so that what races is the
    decision itself, and closes its own database connection at the end. `on_release` runs once,
    in the last thread to arrive, just before the barrier lets them all go.
    """
    barrier = threading.Barrier(len(calls), action=on_release)
    results: list[tuple[str, object] | None] = [None] * len(calls)

    def body(index: int, call) -> None:
        try:
            connection.ensure_connection()
            prepared = call()  # set-up: returns the racing callable
            barrier.wait(timeout=30)
            results[index] = ("ok", prepared())
        except threading.BrokenBarrierError as exc:
            results[index] = ("error", exc)
        except Exception as exc:  # the outcome of the race, judged by the caller
            results[index] = ("error", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a racer is still running: deadlock?"
    assert all(r is not None for r in results), results
    assert not any(isinstance(r[1], threading.BrokenBarrierError) for r in results), results
    return results


def park(count: int, prefix: str) -> list[Run]:
    runs = [start_run({"turns": [[email(f"{prefix}-{i}")]]}) for i in range(count)]
    for run in runs:
        wait_status(run, {"awaiting_approval"}, timeout=60)
    return runs


def emails_of(run: Run) -> int:
    keys = list(SideEffect.objects.filter(run=run).values_list("idempotency_key", flat=True))
    return SentEmail.objects.filter(idempotency_key__in=keys).count()


def test_two_approvers_decide_the_same_request_at_once(cluster, fault_agent, scenario, logdir):
    second = User.objects.create_user("approver2", password="x")
    second.groups.add(Group.objects.get(name="secops"))
    cluster.worker()
    cluster.beat()
    winners = Counter()
    for round_no, run in enumerate(park(ROUNDS, "two-approvers")):
        approval = run.approvals.get(status="pending")

        def decide(username: str):
            user = User.objects.get(username=username)
            return lambda: services.approval_decide(approval_id=approval.id, user=user, approve=True)

        results = race(lambda: decide("approver"), lambda: decide("approver2"))
        ok = [i for i, (kind, _) in enumerate(results) if kind == "ok"]
        errors = [value for kind, value in results if kind == "error"]
        assert len(ok) == 1, f"round {round_no}: {len(ok)} decisions succeeded: {results}"
        assert len(errors) == 1 and isinstance(errors[0], Conflict), f"round {round_no}: {results}"
        winner = ("approver", "approver2")[ok[0]]
        winners[winner] += 1

        wait_status(run, {"succeeded"}, timeout=60)
        approval.refresh_from_db()
        assert approval.status == "approved" and approval.decided_by.username == winner, (round_no, approval.status)
        decided = run.events.filter(kind="approval_decided", data__approval_id=str(approval.id)).count()
        assert decided == 1, f"round {round_no}: the request was closed {decided} times"
        assert SideEffect.objects.filter(run=run, status="done").count() == 1, round_no
        assert emails_of(run) == 1, f"round {round_no}: {emails_of(run)} emails"
        assert Receipt.objects.filter(run=run).count() == 1, round_no
        body = Receipt.objects.get(run=run).body
        assert f'"decided_by":"{winner}"' in body, round_no
    scenario["winners"] = dict(winners)
    _note(logdir, scenario["scenario"], {"winners": dict(winners)})
    check_invariants(scenario)


def test_approve_races_expiry_and_cancel(cluster, fault_agent, scenario, logdir):
    cluster.worker()
    cluster.beat()
    rng = random.Random(20240611)
    outcomes = Counter()
    for round_no, run in enumerate(park(ROUNDS, "approve-expire-cancel")):
        approval = run.approvals.get(status="pending")
        # Jitter each racer by 0-100 ms around the 50 ms expiry so every order gets its turn; in
        # every other round the cancel comes later, while the approved run may be executing.
        delays = [rng.uniform(0, 0.1), rng.uniform(0, 0.1),
                  rng.uniform(0, 0.1) if round_no % 2 else rng.uniform(0.1, 1.5)]

        def decide():
            user = User.objects.get(username="approver")

            def go():
                _sleep(delays[0])
                return services.approval_decide(approval_id=approval.id, user=user, approve=True)
            return go

        def expire():
            def go():
                _sleep(delays[1])
                return services.approval_expire_due()
            return go

        def cancel():
            owner, target = User.objects.get(username="operator"), Run.objects.get(id=run.id)

            def go():
                _sleep(delays[2])
                return services.run_cancel(run=target, user=owner)
            return go

        def expires_soon():  # the clock starts as the racers are released
            ApprovalRequest.objects.filter(id=approval.id).update(
                expires_at=timezone.now() + timedelta(milliseconds=50))

        (decide_kind, decide_value), (expire_kind, expire_value), (cancel_kind, cancel_value) = race(
            decide, expire, cancel, on_release=expires_soon)

        # Only the refusals the API turns into a 409 are acceptable outcomes for a loser.
        assert decide_kind == "ok" or isinstance(decide_value, Conflict), f"round {round_no}: {decide_value!r}"
        assert expire_kind == "ok" and expire_value in (0, 1), f"round {round_no}: {expire_value!r}"
        assert cancel_kind == "ok" or isinstance(cancel_value, Conflict), f"round {round_no}: {cancel_value!r}"

        wait_status(run, set(TERMINAL), timeout=60)
        approval.refresh_from_db()
        decided = list(run.events.filter(kind="approval_decided", data__approval_id=str(approval.id)))
        finished = run.events.filter(kind="run_finished").count()
        sent = emails_of(run)
        outcomes[f"{approval.status}/{run.status}"] += 1

        # Exactly one final status for the request, reached exactly once.
        assert approval.status in {"approved", "expired", "cancelled"}, (round_no, approval.status)
        if approval.status == "cancelled":
            assert not decided and run.status == "cancelled", (round_no, decided, run.status)
        else:
            assert len(decided) == 1 and decided[0].data["decision"] == approval.status, (round_no, decided)
        # Who won is told truthfully to who lost.
        if decide_kind == "ok":
            assert approval.status == "approved" and approval.decided_by.username == "approver", round_no
        if approval.status == "approved":
            assert decide_kind == "ok", f"round {round_no}: approved, yet the approver was told {decide_value!r}"
        if expire_value == 1:
            assert approval.status == "expired", round_no
        if cancel_kind == "ok" and cancel_value.status == "cancelled":
            assert run.status == "cancelled", (round_no, run.status)  # cancelled here and now: stays so
        # The run ended once, with at most one (approved) email and one receipt that says so.
        assert finished == 1, f"round {round_no}: run_finished {finished} times"
        assert sent <= 1, f"round {round_no}: {sent} emails"
        if sent:
            assert approval.status == "approved", (round_no, approval.status)
        if approval.status == "approved" and run.status == "succeeded":
            assert sent == 1, f"round {round_no}: approved and succeeded without its email"
        if approval.status != "approved":
            assert not SideEffect.objects.filter(run=run).exists(), round_no
        receipts = list(Receipt.objects.filter(run=run))
        assert len(receipts) == 1, round_no
        assert f'"status":"{run.status}"' in receipts[0].body, round_no
        assert f'"decision":"{approval.status}"' in receipts[0].body, round_no
    scenario["outcomes"] = dict(outcomes)
    _note(logdir, scenario["scenario"], {"outcomes (request/run)": dict(outcomes)})
    check_invariants(scenario)


def _sleep(seconds: float) -> None:
    threading.Event().wait(seconds)


def _event_seq_collision(exc: BaseException) -> bool:
    return isinstance(exc, IntegrityError) and "run_event_seq_unique" in str(exc)


def _note(logdir, name: str, data: dict) -> None:
    with open(logdir / "races.jsonl", "a") as handle:
        handle.write(json.dumps({"scenario": name, **data}) + "\n")


@pytest.fixture
def as_a_worker(settings):
    """The test process advances runs too: give it the suite workers' lease and slice."""
    settings.WARRANT = {**settings.WARRANT, "LEASE_SECONDS": int(SUITE_ENV["WARRANT_LEASE_SECONDS"]),
                        "MAX_DELIVERIES": int(SUITE_ENV["WARRANT_MAX_DELIVERIES"]),
                        "TIME_SLICE_SECONDS": float(SUITE_ENV["WARRANT_TIME_SLICE_SECONDS"])}


def test_the_receipt_chain_stays_linear_under_concurrent_sealing(cluster, fault_agent, scenario, logdir, as_a_worker):
    cluster.worker()
    cluster.worker()
    cluster.beat()
    quick = {"turns": []}
    started: list[Run] = []
    collisions = Counter()

    def start_many():
        def go():
            for _ in range(20):
                started.append(start_run(quick))
        return go

    def advance_here(name: str):
        # The test process competes with the two workers for the same runs: a third sealer.
        def go():
            deadline = timezone.now() + timedelta(seconds=30)
            while timezone.now() < deadline:
                ids = list(Run.objects.filter(status="queued").values_list("id", flat=True)[:1])
                for run_id in ids:
                    try:
                        services.run_advance(run_id=str(run_id), worker=name)
                    except IntegrityError as exc:
                        # The known defect (see the xfail test below): what a real worker's task
                        # does here is fail the same way; the lease and the reconciler recover it.
                        if not _event_seq_collision(exc):
                            raise
                        collisions[name] += 1
                if len(started) == 20 and not ids:
                    return
                _sleep(0.03)
        return go

    def start_and_cancel():
        # A cancel of a queued run seals its receipt in the test process, right now.
        def go():
            owner = User.objects.get(username="operator")
            for _ in range(10):
                run = start_run(quick)
                try:
                    services.run_cancel(run=run, user=owner)
                except Conflict:
                    pass  # someone finished it first: fine, it was sealed there
        return go

    results = race(start_many, lambda: advance_here("test-a"), lambda: advance_here("test-b"), start_and_cancel)
    assert all(kind == "ok" for kind, _ in results), results

    wait_for(lambda: not Run.objects.exclude(status__in=TERMINAL).exists(), timeout=60,
             what="every quick run to end")
    check_invariants(scenario)

    receipts = list(Receipt.objects.order_by("seq"))
    total = Run.objects.count()
    assert total == 30
    assert [r.seq for r in receipts] == list(range(1, total + 1)), [r.seq for r in receipts]
    assert receipts[0].prev_hash == GENESIS
    for before, after in zip(receipts, receipts[1:]):
        assert after.prev_hash == before.hash, f"#{after.seq} does not link to #{before.seq}"
    assert len({r.prev_hash for r in receipts}) == total, "two receipts claim the same predecessor: a fork"
    assert len({r.hash for r in receipts}) == total
    verification = receipt_verify_chain()
    assert verification.valid and verification.checked == total, verification

    # Who sealed: the last claimer of each run that ran to its end, and the cancels.
    sealers = Counter()
    for run in Run.objects.exclude(status="cancelled"):
        claims = [e.data["worker"] for e in run.events.filter(kind="claimed").order_by("seq")]
        sealers["test-process" if claims[-1].startswith("test-") else claims[-1].split(":")[0]] += 1
    sealers["cancelled"] = Run.objects.filter(status="cancelled").count()
    scenario["sealers"] = dict(sealers)
    _note(logdir, scenario["scenario"], {"sealers": dict(sealers), "event_seq_collisions": dict(collisions)})
    assert len([k for k, n in sealers.items() if n]) >= 3, f"the sealing was not concurrent enough: {dict(sealers)}"


@pytest.mark.xfail(strict=True, reason=(
    "DEFECT: runs.services._event allocates RunEvent.seq as max(seq)+1 with no lock shared by all "
    "writers. run_advance writes its 'claimed' event outside any transaction and without the run "
    "lock, so an owner's run_cancel on the freshly claimed run (which holds the run lock while it "
    "writes 'cancel_requested') takes the same seq; the worker's insert then dies with "
    "IntegrityError run_event_seq_unique, its task fails, and the run sits 'running' until its "
    "lease expires (WARRANT_LEASE_SECONDS, 300 s by default) before the cancel takes effect."))
def test_a_cancel_racing_a_fresh_claim_does_not_break_the_event_sequence(cluster, fault_agent, scenario, as_a_worker):
    """Deterministic form of the collision seen in the concurrent-sealing scenario.

    No worker runs; the test process is the worker (thread B) and the owner (thread A). B's claim
    is let through, then held until A's cancel has written its event (uncommitted): exactly the
    interleaving that happens by chance between a worker's claim and an API cancel.
    """
    run = start_run({"turns": []})  # its message waits in Redis: no worker is started here
    claimed, cancel_written = threading.Event(), threading.Event()
    real_claim = services._claim

    def claim_then_wait(run_id, worker):
        won = real_claim(run_id, worker)
        claimed.set()
        cancel_written.wait(10)
        return won

    def worker():
        return lambda: services.run_advance(run_id=str(run.id), worker="test-worker")

    def owner():
        user = User.objects.get(username="operator")

        def go():
            claimed.wait(10)
            with transaction.atomic():
                result = services.run_cancel(run=Run.objects.get(id=run.id), user=user)
                cancel_written.set()
                _sleep(0.5)  # the worker now computes its seq and waits on our lock
            return result
        return go

    with mock.patch.object(services, "_claim", claim_then_wait):
        (worker_kind, worker_value), (owner_kind, owner_value) = race(worker, owner)
    assert owner_kind == "ok", owner_value
    assert worker_kind == "ok", f"the worker's step failed: {worker_value!r}"
    wait_status(run, {"cancelled"}, timeout=10)  # at once, not after the lease runs out
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    kinds = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))
    assert "claimed" in kinds and "cancel_requested" in kinds, kinds
    check_invariants(scenario)
