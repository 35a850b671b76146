"""Workers die mid-step; the run still ends once, with one receipt and no repeated side effect."""

from tests.services.conftest import REPORT, approve, check_invariants, email, slow, start_run, wait_event, wait_status


def test_kill_9_of_the_pool_child_mid_step(cluster, fault_agent, scenario):
    worker = cluster.worker()
    cluster.beat()
    run = start_run({"turns": [[slow(2, "first")], [slow(0.1, "second")]]})
    wait_event(run, "claimed")
    worker.kill_pool_child()
    REPORT.fault(scenario)
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    assert run.events.filter(kind="claimed").count() >= 2  # the step was taken over, not lost


def test_kill_9_of_the_whole_worker_then_a_new_one(cluster, fault_agent, scenario):
    first = cluster.worker()
    cluster.beat()
    run = start_run({"turns": [[slow(2)]]})
    wait_event(run, "claimed")
    first.kill()
    REPORT.fault(scenario)
    second = cluster.worker()
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    owners = [e.data["worker"] for e in run.events.filter(kind="claimed").order_by("seq")]
    assert owners[0].split(":")[0] != owners[-1].split(":")[0], owners
    assert second.alive


def test_crash_after_the_side_effect_and_before_the_receipt(cluster, fault_agent, scenario):
    worker = cluster.worker()
    cluster.beat()
    run = start_run({"turns": [[email("renewal"), slow(3)]]})
    wait_status(run, {"awaiting_approval"})
    approve(run)
    # The email goes out, then the worker dies inside the slow call of the same step.
    wait_event(run, "claimed", count=2)
    from agents.models import SentEmail
    from tests.services.processes import wait_for

    wait_for(lambda: SentEmail.objects.count() == 1, timeout=20, what="the email to be sent")
    worker.kill_pool_child()
    REPORT.fault(scenario)
    wait_status(run, {"succeeded"}, timeout=60)
    check_invariants(scenario)
    assert SentEmail.objects.count() == 1


def test_a_poison_step_fails_the_run_after_the_delivery_limit(cluster, fault_agent, scenario):
    cluster.start()
    run = start_run({"turns": [[{"name": "poison", "arguments": {}}]]})
    REPORT.fault(scenario)
    wait_status(run, {"failed"}, timeout=90)
    assert run.error == "internal" and "attempted" in run.error_message
    check_invariants(scenario)
