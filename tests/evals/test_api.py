"""The evals API: golden cases and eval runs, who may use them, and the 400s."""

import pytest

from evals.demo import golden_load
from tests import factories
from evals.models import EvalRun, GoldenCase
from runs.models import Run

pytestmark = pytest.mark.django_db

RUNS, CASES = "/api/v1/evals/runs/", "/api/v1/evals/cases/"
CASE = {"agent": "crm-assistant", "name": "list-accounts-again", "input": "List all accounts.", "roles": ["operators"],
        "expected_status": "succeeded", "tools_called": ["list_accounts"], "output_contains": ["Globex"]}


@pytest.fixture
def golden(demo):
    golden_load()


def test_a_governance_admin_runs_the_golden_set_and_reads_the_run(admin, golden):
    response = admin.post(RUNS, {"agent": "crm-assistant"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["verdict"], body["passed_threshold"], body["total"], body["passed"], body["pass_rate"]) == (
        "passed", True, 20, 20, 1.0)
    assert body["threshold"] == 1.0 and body["agent"] == "crm-assistant" and body["started_by"] == "admin"
    parked = next(r for r in body["results"] if r["case_name"] == "delete-initech-parks")
    assert parked["status"] == "awaiting_approval" and parked["actual"]["awaiting_tool"] == "delete_account"
    assert parked["trace"] and parked["failures"] == []
    again = admin.get(f"{RUNS}{body['id']}/")
    assert again.status_code == 200 and again.json() == body
    assert [r["id"] for r in admin.get(RUNS).json()["results"]] == [body["id"]]
    assert Run.objects.count() == 0


def test_below_the_threshold_the_answer_says_failed_with_the_diff(admin, golden):
    GoldenCase.objects.filter(name="list-accounts").update(output_contains=["Initrode"])
    body = admin.post(RUNS, {"threshold": 1.0}, format="json").json()
    assert (body["verdict"], body["passed_threshold"], body["passed"]) == ("failed", False, 19)
    failed = [r for r in body["results"] if not r["passed"]]
    assert [(r["case_name"], r["failures"][0]["expectation"], r["failures"][0]["expected"]) for r in failed] == [
        ("list-accounts", "output_contains", "Initrode")]
    assert "Acme Corp" in failed[0]["failures"][0]["actual"]
    assert admin.post(RUNS, {"threshold": 0.9}, format="json").json()["verdict"] == "passed"


@pytest.mark.parametrize("body, field", [
    ({"agent": "no-such-agent"}, "agent"),
    ({"threshold": 1.5}, "threshold"),
    ({"threshold": -0.1}, "threshold"),
    ({"threshold": "most"}, "threshold"),
    ({"profile": "no-such-profile"}, "profile"),
    ({"agents": "crm-assistant"}, "agents"),
])
def test_bad_requests_answer_400_and_run_nothing(admin, golden, body, field):
    response = admin.post(RUNS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["details"]
    assert EvalRun.objects.count() == 0


def test_compliance_may_run_evals_and_operators_and_approvers_may_not(compliance, operator, approver, outsider, golden):
    assert compliance.post(RUNS, {"agent": "crm-assistant"}, format="json").status_code == 201
    run_id = EvalRun.objects.get().id
    for client in (operator, approver, outsider):
        assert client.post(RUNS, {}, format="json").status_code == 403
        assert client.get(RUNS).status_code == 403
        assert client.get(f"{RUNS}{run_id}/").status_code == 403
        assert client.get(CASES).status_code == 403
    assert EvalRun.objects.count() == 1


def test_a_governance_admin_who_is_no_superuser_holds_the_permission(governance_admin, golden):
    assert governance_admin.user.has_perm("evals.add_evalrun")
    assert governance_admin.api.post(RUNS, {"agent": "crm-assistant"}, format="json").status_code == 201
    assert governance_admin.api.post(CASES, CASE, format="json").status_code == 201


def test_golden_cases_are_written_by_governance_admins_and_read_by_compliance(admin, governance_admin, compliance,
                                                                              golden):
    made = admin.post(CASES, CASE, format="json")
    assert made.status_code == 201, made.content
    case_id = made.json()["id"]
    assert made.json()["decision"] == "" and made.json()["tools_not_called"] == []
    assert admin.post(CASES, CASE, format="json").status_code == 409
    assert compliance.post(CASES, CASE | {"name": "other"}, format="json").status_code == 403
    listed = compliance.get(CASES, {"agent__slug": "crm-assistant", "limit": 100}).json()
    assert listed["count"] == 21 and case_id in [c["id"] for c in listed["results"]]
    factories.two_admins_change_case(admin, governance_admin.api, "patch", f"{CASES}{case_id}/",
                                     {"output_contains": ["Umbrella"]})
    assert admin.get(f"{CASES}{case_id}/").json()["output_contains"] == ["Umbrella"]
    assert compliance.patch(f"{CASES}{case_id}/", {"enabled": False}, format="json").status_code == 403
    factories.two_admins_change_case(admin, governance_admin.api, "delete", f"{CASES}{case_id}/")
    assert not GoldenCase.objects.filter(id=case_id).exists()


@pytest.mark.parametrize("change, field", [
    ({"awaiting_tool": "send_email"}, "awaiting_tool"),  # only for awaiting_approval
    ({"expected_status": "awaiting_approval", "decision": "approve"}, "decision"),
    ({"stop_reason": "max_turns"}, "stop_reason"),
    ({"expected_status": "parked"}, "expected_status"),
    ({"agent": "no-such-agent"}, "agent"),
    ({"roles": "operators"}, "roles"),
    ({"roles": ["operators", "operator"]}, "roles"),  # no such role: a typo would leave the caller granted nothing
    ({"expected_status": "stopped", "stop_reason": "ran_out"}, "stop_reason"),
    ({"verdict": "pass"}, "verdict"),
])
def test_a_case_that_cannot_be_met_is_refused(admin, golden, change, field):
    response = admin.post(CASES, CASE | change, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["details"]
