"""Budget extensions through real Celery workers, PostgreSQL and Redis: a run that spends its
budget parks in awaiting_budget holding nothing, the decision (or the reconciler's expiry) puts it
back on the queue, and a worker resumes it with the extension or stops it as it would have
stopped. And a tool's cap holds across the approval that runs its first call."""

from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.utils import timezone

from agents.models import SentEmail
from agents.services import agent_publish
from runs import services
from runs.models import ApprovalRequest, Run
from tests.services.conftest import approve, check_invariants, email, start_run, wait_status

LOOKUP = {"name": "list_accounts", "arguments": {}}


def _budgeted(agent, **changes):
    for name, value in changes.items():
        setattr(agent, name, value)
    agent.save()
    agent_publish(agent=agent)


def _budget_request(run: Run) -> ApprovalRequest:
    return ApprovalRequest.objects.get(run=run, kind="budget", status="pending")


def _decide(run: Run, *, yes: bool) -> ApprovalRequest:
    request = _budget_request(run)
    return services.approval_decide(via="session", approval_id=request.id, user=User.objects.get(username="approver"),
                                    approve=yes, reason="" if yes else "over the quarter's allowance")


def test_an_extension_approved_and_one_denied_through_workers(cluster, fault_agent, scenario):
    _budgeted(fault_agent, max_turns=2, budget_role=Group.objects.get(name="secops"))
    cluster.start()
    extended = start_run({"turns": [[LOOKUP], [LOOKUP]], "final": "counted"})
    refused = start_run({"turns": [[LOOKUP], [LOOKUP]], "final": "counted"})
    for run in (extended, refused):
        wait_status(run, {"awaiting_budget"})
        assert _budget_request(run).budget == {"kind": "max_turns", "used": 2, "limit": 2, "asked": 2}
        assert run.lease_owner == "" and run.llm_calls == 2  # parked: no worker holds it

    _decide(extended, yes=True)
    _decide(refused, yes=False)
    wait_status(extended, {"succeeded"})
    wait_status(refused, {"stopped"})
    assert extended.llm_calls == 3 and extended.state["extensions"] == {"max_turns": 2}
    assert extended.events.filter(kind="budget_extended").count() == 1
    assert (refused.stop_reason, refused.llm_calls) == ("max_turns", 2)
    assert refused.events.get(kind="budget_refused").data["decision"] == "denied"
    check_invariants(scenario)


def test_an_extension_nobody_decides_expires_and_the_run_stops(cluster, fault_agent, scenario):
    _budgeted(fault_agent, max_tool_calls=1, budget_role=Group.objects.get(name="secops"))
    cluster.start()
    run = start_run({"turns": [[LOOKUP, LOOKUP]]})
    wait_status(run, {"awaiting_budget"})
    request = _budget_request(run)
    assert request.budget["kind"] == "tool_budget"
    # Its deadline passes: the reconciler the workers and beat run expires it, a denial.
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    wait_status(run, {"stopped"}, timeout=60)
    assert run.stop_reason == "tool_budget" and run.tool_calls == 1
    request.refresh_from_db()
    assert request.status == "expired"
    assert run.events.get(kind="budget_refused").data["decision"] == "expired"
    check_invariants(scenario)


def test_a_tools_cap_holds_across_the_approval_of_its_first_call(cluster, fault_agent, scenario):
    _budgeted(fault_agent, tool_caps={"send_email": 1})
    cluster.worker()
    run = start_run({"turns": [[email("first"), email("second")]], "final": "sent"})
    wait_status(run, {"awaiting_approval"})
    approve(run)
    wait_status(run, {"succeeded"})
    assert list(SentEmail.objects.values_list("subject", flat=True)) == ["first"]
    assert ApprovalRequest.objects.filter(run=run).count() == 1  # the second was refused, not asked about
    assert [e.data["code"] for e in run.events.filter(kind="tool_refused")] == ["tool_cap"]
    check_invariants(scenario)
