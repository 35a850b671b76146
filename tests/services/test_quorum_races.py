"""Quorum races on real PostgreSQL with a real Celery worker: N approvers deciding one request at
once close it exactly once, and one denial among them denies.

Each racer is a thread of the test process with its own connection, released on a barrier
(tests.services.test_races.race), so the decisions meet in the database under the run-then-
request row locks of runs.approvals.
"""

from collections import Counter

from django.contrib.auth.models import Group, User

from core.api_errors import Conflict
from governance import services as governance_services
from governance.models import Policy
from runs import services
from runs.models import ApprovalDecision, Receipt
from tests.services.conftest import check_invariants, wait_status
from tests.services.test_races import _note, emails_of, park, race

ROUNDS = 5
QUORUM = 2
APPROVERS = ("approver", "approver2", "approver3")


def _secops_asks_two() -> None:
    secops = Group.objects.get(name="secops")
    for name in APPROVERS[1:]:
        User.objects.create_user(name, password="x").groups.add(secops)
    governance_services.policy_update(policy=Policy.objects.get(name="side-effects-need-secops"),
                                      values={"quorum": QUORUM})


def _decide(approval_id, username: str, approve: bool):
    user = User.objects.get(username=username)
    return lambda: services.approval_decide(via="session", approval_id=approval_id, user=user, approve=approve,
                                            reason="" if approve else "not this one")


def test_three_approvers_at_once_on_a_quorum_of_two(cluster, fault_agent, scenario, logdir):
    _secops_asks_two()
    cluster.worker()
    closers = Counter()
    for round_no, run in enumerate(park(ROUNDS, "quorum-three")):
        approval = run.approvals.get(status="pending")
        assert approval.quorum == QUORUM, round_no
        results = race(*(lambda name=name: _decide(approval.id, name, True) for name in APPROVERS))
        ok = [APPROVERS[i] for i, (kind, _) in enumerate(results) if kind == "ok"]
        errors = [value for kind, value in results if kind == "error"]
        # Two land (the first recorded, the second closes it); the third finds it decided.
        assert len(ok) == QUORUM and len(errors) == 1 and isinstance(errors[0], Conflict), (round_no, results)
        wait_status(run, {"succeeded"}, timeout=60)
        approval.refresh_from_db()
        assert (approval.status, approval.approvals_count) == ("approved", QUORUM), round_no
        assert approval.decided_by.username in ok, round_no
        closers[approval.decided_by.username] += 1
        assert ApprovalDecision.objects.filter(approval=approval).count() == QUORUM, round_no
        assert run.events.filter(kind="approval_recorded").count() == 1, round_no
        assert run.events.filter(kind="approval_decided").count() == 1, round_no
        assert emails_of(run) == 1, f"round {round_no}: {emails_of(run)} emails"
        assert '"quorum":2' in Receipt.objects.get(run=run).body, round_no
    scenario["closers"] = dict(closers)
    _note(logdir, scenario["scenario"], {"closers": dict(closers)})
    check_invariants(scenario)


def test_one_denial_among_approvals_at_once_denies(cluster, fault_agent, scenario, logdir):
    _secops_asks_two()
    cluster.worker()
    outcomes = Counter()
    for round_no, run in enumerate(park(ROUNDS, "quorum-deny")):
        approval = run.approvals.get(status="pending")
        # approver and approver2 approve, approver3 denies, all released together.
        results = race(*(lambda name=name: _decide(approval.id, name, name != "approver3") for name in APPROVERS))
        wait_status(run, {"succeeded"}, timeout=60)
        approval.refresh_from_db()
        decisions = dict(ApprovalDecision.objects.filter(approval=approval).values_list("username", "decision"))
        # Either both approvals landed first (approved, the denial came too late), or the denial
        # landed before the second approval: then it is denied and nothing ran. Never both.
        if approval.status == "approved":
            assert decisions == {"approver": "approved", "approver2": "approved"}, (round_no, decisions)
            assert emails_of(run) == 1, round_no
            assert isinstance(results[2][1], Conflict), round_no
        else:
            assert approval.status == "denied" and decisions.get("approver3") == "denied", (round_no, decisions)
            assert emails_of(run) == 0, f"round {round_no}: a denied call sent {emails_of(run)} emails"
        assert run.events.filter(kind="approval_decided").count() == 1, round_no
        assert len(decisions) <= QUORUM + 1 and list(decisions.values()).count("denied") <= 1, round_no
        outcomes[approval.status] += 1
    scenario["outcomes"] = dict(outcomes)
    _note(logdir, scenario["scenario"], {"outcomes": dict(outcomes)})
    check_invariants(scenario)
