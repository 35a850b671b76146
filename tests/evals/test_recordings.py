"""Hermetic golden cases: each runs against the read-only tool results it was recorded with, so a
legitimate change of the CRM data (an approved run deleted Initech) neither breaks the set nor
holds every policy change at its gate. Recording is an explicit, versioned change of a case."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import CrmAccount
from evals.demo import fresh_recordings, golden_load, shipped_recordings
from evals import proposals
from evals.models import GoldenCase, GoldenCaseProposal, GoldenCaseVersion
from evals.runner import run_evals
from governance import drafts
from governance.models import Policy, PolicyVersion
from tests import factories
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
def test_the_command_proposes_recordings_and_says_which_it_refused(demo, capsys):
    golden_load()
    GoldenCase.objects.filter(name__in=["list-accounts", "delete-initech-parks"]).update(recordings=[])
    assert run_evals_cli("--record", "--agent", "crm-assistant", "--case", "list-accounts", "--by", "admin") == 0
    assert "proposed  crm-assistant/list-accounts: 1 call(s), proposal" in capsys.readouterr().out
    assert GoldenCase.objects.get(name="list-accounts").recordings == []  # a proposal, not kept yet
    proposals.approve(GoldenCaseProposal.objects.get(case_name="list-accounts"), user=factories.governance_admin())
    assert GoldenCase.objects.get(name="list-accounts").recordings[0]["tool"] == "list_accounts"
    CrmAccount.objects.filter(account_id="A-300").delete()
    assert run_evals_cli("--record", "--agent", "crm-assistant", "--case", "delete-initech-parks", "--by", "admin") == 1
    assert "REFUSED   crm-assistant/delete-initech-parks" in capsys.readouterr().out
    assert not GoldenCaseProposal.objects.filter(case_name="delete-initech-parks").exists()
    for args in (["--case", "list-accounts"], ["--record", "--case", "list-accounts"],
                 ["--record", "--profile", "replay"], ["--record", "--agent", "crm-assistant", "--case", "nope", "--by",
                                                       "admin"],
                 ["--record", "--agent", "crm-assistant"], ["--record", "--agent", "crm-assistant", "--by", "operator"]):
        assert run_evals_cli(*args) == 2, args


def test_the_workbench_proposes_a_recording_and_a_second_admin_approves_it(admin_client, demo):
    golden_load()
    case = GoldenCase.objects.get(name="umbrella-usage")
    GoldenCase.objects.filter(pk=case.pk).update(recordings=[])
    response = admin_client.post("/admin/evals/goldencase/", {"action": "record_cases", "_selected_action": [case.pk]},
                                 follow=True)
    assert b"umbrella-usage: a recording proposed" in response.content
    proposal = GoldenCaseProposal.objects.get(case=case)
    assert GoldenCase.objects.get(pk=case.pk).recordings == []
    decide = {"action": "approve", "_selected_action": [proposal.pk]}
    mine = admin_client.post("/admin/evals/goldencaseproposal/", decide, follow=True)
    assert b"needs a second governance admin" in mine.content
    assert GoldenCaseProposal.objects.get(pk=proposal.pk).status == "pending"
    second = factories.governance_admin(superuser=True)
    factories.browser(second).post("/admin/evals/goldencaseproposal/", decide, follow=True)
    assert GoldenCaseProposal.objects.get(pk=proposal.pk).status == "approved"
    page = admin_client.get(f"/admin/evals/goldencase/{case.pk}/change/")
    assert page.status_code == 200 and b"get_usage_trend" in page.content and b"Versions" in page.content
    assert list(GoldenCaseVersion.objects.filter(case=case).values_list(
        "action", "changed_by__username", "proposed_by__username")) == [
        ("record", second.username, "admin"), ("create", None, None)]


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
