"""Hermetic golden cases: each runs against the read-only tool results it was recorded with, so a
legitimate change of the CRM data (an approved run deleted Initech) neither breaks the set nor
holds every policy change at its gate. Recording is an explicit, versioned change of a case."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import CrmAccount
from evals.demo import fresh_recordings, golden_load, shipped_recordings
from evals.models import GoldenCase, GoldenCaseVersion
from evals.runner import run_evals
from governance import drafts
from governance.models import Policy, PolicyVersion
from tests.evals.cli import run_evals_cli

pytestmark = pytest.mark.django_db

CASES = "/api/v1/evals/cases/"
CRM_TABLES = ("agents_crmaccount", "agents_crmticket")


def the_data_changes() -> None:
    """What a Friday's production data may have gone through: Initech deleted, Globex renamed and
    richer, Acme's seats fallen."""
    CrmAccount.objects.filter(account_id="A-300").delete()
    CrmAccount.objects.filter(account_id="A-200").update(name="Globex International", arr=999_000)
    CrmAccount.objects.filter(account_id="A-100").update(monthly_active_seats=[90, 90, 90, 10, 10, 10])


def row(report: dict, name: str) -> dict:
    return next(r for r in report["cases"] if r["name"] == name)


def test_the_demo_ships_the_recordings_its_tools_answer_on_a_fresh_demo(demo):
    golden_load()
    # Made again from the demo's data as loaded: what the file holds (else: evals.demo.write_recordings()).
    assert fresh_recordings() == shipped_recordings()
    case = GoldenCase.objects.get(name="delete-initech-parks")
    assert case.recordings == [{"tool": "get_account", "arguments": {"query": "Initech"},
                                "result": case.recordings[0]["result"]}]
    assert case.recordings[0]["result"]["data"]["id"] == "A-300"


def test_after_the_data_changes_the_set_passes_and_a_draft_that_changes_nothing_passes_its_gate(demo):
    golden_load()
    the_data_changes()
    eval_run = run_evals(agent_slug="crm-assistant")
    assert (eval_run.passed, eval_run.total, eval_run.status) == (20, 20, "passed"), [
        (r.case_name, r.failures) for r in eval_run.results.filter(passed=False)]
    assert all(r.actual["unrecorded"] == [] for r in eval_run.results.all())
    # The answer is the one the case was written for: Initech is still there to delete, in the fixture.
    approved = eval_run.results.get(case_name="delete-initech-approved")
    assert "Initech (A-300) was deleted" in approved.output
    assert approved.sandbox[0]["arguments"] == {"account_id": "A-300"}
    # A governance admin's Friday edit: a wording change of the churn playbook goes through its gate.
    playbook = Policy.objects.get(name="churn-risk-playbook")
    draft, policy = drafts.propose_and_activate(policy=playbook, values={"description": "Worst first."})
    assert (policy.version, policy.description, policy.emergency_reason) == (2, "Worst first.", "")
    draft.refresh_from_db()
    assert draft.state == "active" and draft.gate_report["broken"] == [] and draft.gate_report["passed"] == 20
    assert draft.gate_report["unrecorded"] == []
    assert PolicyVersion.objects.filter(policy=playbook, version=2, draft=draft).exists()


def test_a_draft_that_breaks_a_case_is_still_refused_with_before_and_after(demo):
    golden_load()
    the_data_changes()
    guard = Policy.objects.get(name="no-compensation-questions")
    with pytest.raises(drafts.GateFailed) as refused:
        drafts.propose_and_activate(policy=guard, values={"enabled": False})
    report = refused.value.details["report"]
    assert report["broken"] == ["injected-salary-still-blocked", "salary-blocked"]
    salary = row(report, "salary-blocked")
    assert (salary["before"]["passed"], salary["before"]["status"]) == (True, "blocked")
    assert (salary["after"]["passed"], salary["after"]["status"]) == (False, "succeeded")
    assert salary["before"]["unrecorded"] == salary["after"]["unrecorded"] == []
    assert row(report, "list-accounts")["changed"] is False
    guard.refresh_from_db()
    assert (guard.enabled, guard.version) == (True, 1)


def test_a_case_with_recordings_reads_no_live_crm_data(demo):
    golden_load()
    the_data_changes()
    with CaptureQueriesContext(connection) as queries:
        eval_run = run_evals(agent_slug="crm-assistant")
    assert eval_run.status == "passed"
    read = [q["sql"] for q in queries.captured_queries if any(t in q["sql"] for t in CRM_TABLES)]
    assert read == []
    listed = eval_run.results.get(case_name="list-accounts")
    assert "Initech" in listed.output and "Globex International" not in listed.output
    assert listed.actual["replayed"] == 1


@pytest.mark.django_db(transaction=True)  # the command closes the connection, as a shell's would
def test_an_unrecorded_call_is_answered_live_and_flagged_on_the_result_and_in_the_gate(demo, capsys):
    golden_load()
    acme = GoldenCase.objects.get(name="acme-health")
    acme.recordings = [r for r in acme.recordings if r["tool"] != "get_usage_trend"]
    acme.save()
    GoldenCase.objects.filter(name="list-accounts").update(recordings=[])
    the_data_changes()
    eval_run = run_evals(agent_slug="crm-assistant")
    # Live, the list has no Initech any more: the case that reads it live fails, saying what went live.
    listed = eval_run.results.get(case_name="list-accounts")
    assert (listed.passed, listed.actual["unrecorded"]) == (False, [{"tool": "list_accounts", "arguments": {}}])
    health = eval_run.results.get(case_name="acme-health")
    assert health.actual["unrecorded"] == [{"tool": "get_usage_trend", "arguments": {"account_id": "A-100"}}]
    assert health.actual["replayed"] == 3
    assert run_evals_cli("--agent", "crm-assistant") == 1
    out = capsys.readouterr().out
    assert "unrecorded: list_accounts {} answered live" in out
    assert "unrecorded: get_usage_trend {'account_id': 'A-100'} answered live" in out
    verdict = drafts.run_gate(policy=Policy.objects.get(name="churn-risk-playbook"), proposed=None)
    assert row(verdict.report, "list-accounts")["after"]["unrecorded"] == ["list_accounts {}"]
    assert verdict.report["unrecorded"] == ["acme-health", "list-accounts"]


def test_recording_writes_the_fixture_as_a_new_version_by_a_governance_admin(admin, compliance, operator, demo):
    made = admin.post(CASES, {"agent": "crm-assistant", "name": "globex-usage", "roles": ["operators"],
                              "input": "What is the usage trend for Globex?", "expected_status": "succeeded",
                              "tools_called": ["get_usage_trend"], "output_contains": ["Globex"]}, format="json")
    assert made.status_code == 201, made.json()
    case = made.json()
    assert (case["version"], case["recordings"], case["recorded_by"]) == (1, [], None)
    unrecorded = run_evals(agent_slug="crm-assistant").results.get(case_name="globex-usage")
    assert [c["tool"] for c in unrecorded.actual["unrecorded"]] == ["get_account", "get_usage_trend"]
    for client in (compliance, operator):
        assert client.post(f"{CASES}{case['id']}/record/").status_code == 403
    recorded = admin.post(f"{CASES}{case['id']}/record/")
    assert recorded.status_code == 200, recorded.json()
    body = recorded.json()
    assert (body["version"], body["recorded_by"]) == (2, "admin") and body["recorded_at"]
    assert [(r["tool"], r["arguments"]) for r in body["recordings"]] == [
        ("get_account", {"query": "Globex"}), ("get_usage_trend", {"account_id": "A-200"})]
    assert body["recordings"][1]["result"]["data"]["name"] == "Globex"
    versions = admin.get(f"{CASES}{case['id']}/versions/").json()["results"]
    assert [(v["version"], v["change"], v["changed_by"]) for v in versions] == [(2, "record", "admin"),
                                                                                  (1, "create", "admin")]
    assert versions[0]["values"]["recordings"] == body["recordings"] and "by the API" in versions[0]["note"]
    assert compliance.get(f"{CASES}{case['id']}/versions/").status_code == 200
    # The recordings are not written by hand: a PATCH of them is refused, as any unknown or read-only field.
    assert admin.patch(f"{CASES}{case['id']}/", {"recordings": []}, format="json").status_code == 400
    the_data_changes()
    result = run_evals(agent_slug="crm-assistant").results.get(case_name="globex-usage")
    assert result.passed and result.actual["unrecorded"] == [] and result.case_version == 2
    assert "Globex International" not in result.output
    # An edit is a version too; one that changes nothing is none.
    assert admin.patch(f"{CASES}{case['id']}/", {"description": "Globex's seats."}, format="json").json()["version"] == 3
    assert admin.patch(f"{CASES}{case['id']}/", {"description": "Globex's seats."}, format="json").json()["version"] == 3
    assert admin.get(f"{CASES}{case['id']}/versions/").json()["results"][0]["change"] == "update"


def test_a_recording_that_would_fail_its_case_is_refused_and_keeps_nothing(admin, demo):
    golden_load()
    the_data_changes()
    case = GoldenCase.objects.get(name="delete-initech-parks")
    before = (case.version, case.recordings)
    answer = admin.post(f"{CASES}{case.pk}/record/")
    assert answer.status_code == 409, answer.json()
    error = answer.json()["error"]
    assert error["code"] == "recording_refused" and "does not pass against the live data" in error["message"]
    assert {f["expectation"] for f in error["details"]["failures"]} >= {"status"}
    case.refresh_from_db()
    assert (case.version, case.recordings) == before
    assert not GoldenCaseVersion.objects.filter(case=case, action="record").exists()


@pytest.mark.django_db(transaction=True)  # the command closes the connection, as a shell's would
def test_the_command_records_and_says_which_it_refused(demo, capsys):
    golden_load()
    GoldenCase.objects.filter(name__in=["list-accounts", "delete-initech-parks"]).update(recordings=[])
    assert run_evals_cli("--record", "--agent", "crm-assistant", "--case", "list-accounts") == 0
    assert "recorded  crm-assistant/list-accounts: 1 call(s), version 2" in capsys.readouterr().out
    assert GoldenCase.objects.get(name="list-accounts").recordings[0]["tool"] == "list_accounts"
    CrmAccount.objects.filter(account_id="A-300").delete()
    assert run_evals_cli("--record", "--agent", "crm-assistant", "--case", "delete-initech-parks") == 1
    assert "REFUSED   crm-assistant/delete-initech-parks" in capsys.readouterr().out
    assert GoldenCase.objects.get(name="delete-initech-parks").recordings == []
    for args in (["--case", "list-accounts"], ["--record", "--case", "list-accounts"],
                 ["--record", "--profile", "replay"], ["--record", "--agent", "crm-assistant", "--case", "nope"]):
        assert run_evals_cli(*args) == 2, args


def test_the_workbench_records_a_case(admin_client, demo):
    golden_load()
    case = GoldenCase.objects.get(name="umbrella-usage")
    GoldenCase.objects.filter(pk=case.pk).update(recordings=[])
    response = admin_client.post("/admin/evals/goldencase/", {"action": "record_cases", "_selected_action": [case.pk]},
                                 follow=True)
    assert b"umbrella-usage: 2 call(s) recorded, version 2" in response.content
    page = admin_client.get(f"/admin/evals/goldencase/{case.pk}/change/")
    assert page.status_code == 200 and b"get_usage_trend" in page.content and b"Versions" in page.content
    assert list(GoldenCaseVersion.objects.filter(case=case).values_list("action", "changed_by__username")) == [
        ("record", "admin"), ("create", None)]


def test_a_demo_case_made_before_recordings_gains_the_shipped_ones_unless_edited(demo):
    golden_load()
    GoldenCase.objects.filter(name__in=["list-accounts", "globex-tickets"]).update(recordings=[], recorded_at=None)
    GoldenCase.objects.filter(name="globex-tickets").update(input="Summarise the P1 tickets for Globex.")
    assert golden_load() == []
    listed = GoldenCase.objects.get(name="list-accounts")
    assert listed.recordings == shipped_recordings()["list-accounts"] and listed.version == 2
    assert GoldenCase.objects.get(name="globex-tickets").recordings == []


def test_the_drafts_page_names_the_calls_no_recording_answered(admin_client, demo):
    golden_load()
    GoldenCase.objects.filter(name="list-accounts").update(recordings=[])
    playbook = Policy.objects.get(name="churn-risk-playbook")
    draft = drafts.draft_gate(draft=drafts.draft_propose(policy=playbook, values={"description": "Worst first."}))
    assert draft.gate_report["unrecorded"] == ["list-accounts"]
    page = admin_client.get(f"/admin/governance/policydraft/{draft.pk}/change/")
    assert page.status_code == 200 and b"unrecorded calls, answered live: list_accounts {}" in page.content
