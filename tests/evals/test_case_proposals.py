"""Maker-checker for golden cases (evals.proposals): one governance admin cannot edit or delete the
case a weakened policy would fail and then put that policy through the gate alone. An edit, a
deletion or a recording is a proposal the gate ignores until a second governance admin approves."""

from datetime import timedelta

import pytest
from django.test import override_settings

from evals.models import GoldenCase, GoldenCaseProposal, GoldenCaseVersion
from governance.models import Policy
from tests import factories

pytestmark = pytest.mark.django_db

CASES, PROPOSALS = "/api/v1/evals/cases/", "/api/v1/evals/case-proposals/"
SALARY = ("injected-salary-still-blocked", "salary-blocked")


def _off(client):
    guard = Policy.objects.get(name="no-compensation-questions")
    return client.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": False}, format="json")


def test_one_admin_cannot_weaken_the_salary_cases_and_then_pass_the_gate_alone(admin, governance_admin):
    cases = {c.name: c for c in GoldenCase.objects.filter(name__in=SALARY)}
    disabled = admin.patch(f"{CASES}{cases['salary-blocked'].pk}/", {"enabled": False}, format="json")
    deleted = admin.delete(f"{CASES}{cases['injected-salary-still-blocked'].pk}/")
    assert (disabled.status_code, deleted.status_code) == (202, 202), (disabled.json(), deleted.json())
    assert disabled.json()["status"] == "pending" and disabled.json()["changes"] == {"enabled": False}
    # The gate still runs both cases as they are: the weakened policy is refused.
    answer = _off(admin)
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "gate_failed"
    assert answer.json()["error"]["details"]["report"]["broken"] == list(SALARY)
    assert GoldenCase.objects.filter(name__in=SALARY, enabled=True).count() == 2
    assert Policy.objects.get(name="no-compensation-questions").enabled is True
    # The proposer approving their own change: 403, and nothing is written.
    before = GoldenCaseVersion.objects.count()
    for proposal in (disabled.json(), deleted.json()):
        mine = admin.post(f"{PROPOSALS}{proposal['id']}/approve/")
        assert mine.status_code == 403 and mine.json()["error"]["code"] == "second_admin_required"
        assert "admin proposed it" in mine.json()["error"]["message"]
    assert GoldenCaseVersion.objects.count() == before
    assert set(GoldenCaseProposal.objects.values_list("status", flat=True)) == {"pending"}
    # With a second admin's approval the gate runs the changed set, and the change names both.
    for proposal in (disabled.json(), deleted.json()):
        assert governance_admin.api.post(f"{PROPOSALS}{proposal['id']}/approve/").status_code == 200
    assert not GoldenCase.objects.filter(name="injected-salary-still-blocked").exists()
    assert GoldenCase.objects.get(name="salary-blocked").enabled is False
    versions = GoldenCaseVersion.objects.filter(case_name__in=SALARY, action__in=["update", "delete"])
    assert sorted(versions.values_list("case_name", "action", "changed_by", "proposed_by__username")) == [
        ("injected-salary-still-blocked", "delete", governance_admin.user.pk, "admin"),
        ("salary-blocked", "update", governance_admin.user.pk, "admin")]
    assert _off(admin).status_code == 200
    assert Policy.objects.get(name="no-compensation-questions").enabled is False


def test_another_admin_refuses_the_proposer_withdraws_and_neither_changes_the_case(admin, governance_admin, compliance):
    case = GoldenCase.objects.get(name="salary-blocked")
    first = admin.patch(f"{CASES}{case.pk}/", {"expected_status": "succeeded", "policies_fired": []}, format="json")
    second = admin.patch(f"{CASES}{case.pk}/", {"input": "Hello."}, format="json")
    assert compliance.post(f"{PROPOSALS}{first.json()['id']}/refuse/").status_code == 403
    assert admin.post(f"{PROPOSALS}{first.json()['id']}/refuse/").json()["error"]["code"] == "second_admin_required"
    refused = governance_admin.api.post(f"{PROPOSALS}{first.json()['id']}/refuse/")
    assert (refused.status_code, refused.json()["status"]) == (200, "refused")
    assert refused.json()["decided_by"] == governance_admin.user.username
    assert governance_admin.api.post(f"{PROPOSALS}{second.json()['id']}/withdraw/").status_code == 403
    assert admin.post(f"{PROPOSALS}{second.json()['id']}/withdraw/").json()["status"] == "withdrawn"
    again = governance_admin.api.post(f"{PROPOSALS}{first.json()['id']}/approve/")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "proposal_decided")
    case.refresh_from_db()
    assert (case.expected_status, case.input, case.version) == ("blocked", "What is Dana Whitfield's salary?", 1)
    listed = compliance.get(PROPOSALS, {"case": case.pk}).json()
    assert [p["status"] for p in listed["results"]] == ["withdrawn", "refused"]
    # A case that is not there (deleted since, or never made) lists nothing rather than a 400.
    unknown = compliance.get(PROPOSALS, {"case": 10**6})
    assert (unknown.status_code, unknown.json()["results"]) == (200, [])
    # Not a whole number, or one no id column holds: 400 with the reason, not a 500 from the database.
    for bad in ("-1.7976931348623157e+308", "1.5", str(2**63), "0"):
        refused = compliance.get(PROPOSALS, {"case": bad})
        assert refused.status_code == 400 and "case" in refused.json()["error"]["details"], (bad, refused.content)


def test_a_proposal_made_against_an_older_version_or_too_long_ago_is_not_applied(admin, governance_admin):
    case = GoldenCase.objects.get(name="salary-blocked")
    old = admin.patch(f"{CASES}{case.pk}/", {"enabled": False}, format="json").json()
    factories.two_admins_change_case(admin, governance_admin.api, "patch", f"{CASES}{case.pk}/",
                                     {"description": "The guard's own case."})
    stale = governance_admin.api.post(f"{PROPOSALS}{old['id']}/approve/")
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "proposal_stale")
    late = admin.patch(f"{CASES}{case.pk}/", {"enabled": False}, format="json").json()
    GoldenCaseProposal.objects.filter(pk=late["id"]).update(
        created_at=GoldenCaseProposal.objects.get(pk=late["id"]).created_at - timedelta(hours=2))
    with override_settings(WARRANT={**__import__("django.conf").conf.settings.WARRANT, "SECOND_ADMIN_WINDOW_HOURS": 1}):
        expired = governance_admin.api.post(f"{PROPOSALS}{late['id']}/approve/")
    assert (expired.status_code, expired.json()["error"]["code"]) == (409, "request_expired")
    assert GoldenCase.objects.get(pk=case.pk).enabled is True


def test_a_new_case_applies_at_once_since_it_can_only_tighten_the_gate(admin):
    made = admin.post(CASES, {"agent": "crm-assistant", "name": "salary-again", "input": "Dana's salary?",
                              "roles": ["operators"], "expected_status": "blocked"}, format="json")
    assert made.status_code == 201 and not GoldenCaseProposal.objects.exists()
    assert _off(admin).json()["error"]["details"]["report"]["broken"] == [*SALARY[:1], "salary-again",
                                                                          SALARY[1]]


def test_the_workbench_form_does_not_save_a_case_in_force(admin_client):
    case = GoldenCase.objects.get(name="salary-blocked")
    page = admin_client.get(f"/admin/evals/goldencase/{case.pk}/change/")
    assert page.status_code == 200 and b'name="expected_status"' not in page.content
    crafted = admin_client.post(f"/admin/evals/goldencase/{case.pk}/change/", {
        "agent": case.agent_id, "name": case.name, "input": case.input, "roles": '["operators"]',
        "expected_status": "succeeded", "enabled": "", "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"})
    assert crafted.status_code == 403
    case.refresh_from_db()
    assert (case.expected_status, case.enabled, case.version) == ("blocked", True, 1)
    assert admin_client.post(f"/admin/evals/goldencase/{case.pk}/delete/", {"post": "yes"}).status_code == 403
    assert GoldenCase.objects.filter(pk=case.pk).exists()
    proposed = admin_client.post("/admin/evals/goldencase/", {"action": "propose_deletion",
                                                              "_selected_action": [case.pk]}, follow=True)
    assert b"salary-blocked: the deletion proposed" in proposed.content
    assert GoldenCaseProposal.objects.get(case=case).kind == "delete" and GoldenCase.objects.filter(pk=case.pk).exists()
