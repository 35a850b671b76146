"""Policy drafts in the workbench: the gate side by side, the gated activation action, the emergency reason."""

import pytest
from django.contrib.auth import get_user_model

from governance.models import Policy, PolicyDraft

pytestmark = pytest.mark.django_db

REASON = "Legal asked for the salary guard off during the HR migration; ticket OPS-42"


@pytest.fixture
def failed_draft(admin) -> PolicyDraft:
    guard = Policy.objects.get(name="no-compensation-questions")
    answer = admin.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": False}, format="json")
    return PolicyDraft.objects.get(pk=answer.json()["error"]["details"]["draft"])


def test_the_draft_page_shows_the_gate_side_by_side_and_takes_an_emergency_reason(client, failed_draft,
                                                                                   governance_admin):
    client.force_login(get_user_model().objects.get(username="admin"))
    listing = client.get("/admin/governance/policydraft/").content.decode()
    assert "18/20 pass; broken: injected-salary-still-blocked, salary-blocked" in listing
    page = client.get(f"/admin/governance/policydraft/{failed_draft.pk}/change/").content.decode()
    assert "crm-assistant/salary-blocked (changed)" in page and "Emergency activation: reason" in page
    # The gated action refuses it and says why; the policy stays.
    client.post("/admin/governance/policydraft/", {"action": "activate_through_gate",
                                                   "_selected_action": [failed_draft.pk]})
    assert Policy.objects.get(name="no-compensation-questions").enabled is True
    # The emergency reason on the draft's page asks for it; its author may not confirm; another admin does.
    change = f"/admin/governance/policydraft/{failed_draft.pk}/change/"
    client.post(change, {"emergency_reason_given": REASON})
    failed_draft.refresh_from_db()
    assert (failed_draft.state, failed_draft.emergency_requested_by.username) == ("gate_failed", "admin")
    refused = client.post(change, {"emergency_confirm": "on"}, follow=True).content.decode()
    assert "another governance admin must confirm it" in refused
    assert Policy.objects.get(name="no-compensation-questions").enabled is True
    governance_admin.browser.post(change, {"emergency_confirm": "on"})
    failed_draft.refresh_from_db()
    assert (failed_draft.state, failed_draft.emergency_reason, failed_draft.activated_by) == (
        "activated_in_emergency", REASON, governance_admin.user)
    assert Policy.objects.get(name="no-compensation-questions").emergency_reason.startswith(REASON)


def test_operators_do_not_see_drafts(client, failed_draft):
    client.force_login(get_user_model().objects.get(username="operator"))
    assert client.get("/admin/governance/policydraft/").status_code in (302, 403)


def test_the_policy_form_goes_through_the_gate(client, demo):
    client.force_login(get_user_model().objects.get(username="admin"))
    guard = Policy.objects.get(name="no-compensation-questions")
    answer = client.post(f"/admin/governance/policy/{guard.pk}/change/", {
        "name": guard.name, "type": guard.type, "description": guard.description, "priority": guard.priority,
        "keywords": "\n".join(guard.keywords), "match_mode": guard.match_mode, "regex": guard.regex,
        "target_tools": "", "content": guard.content, "response": guard.response, "quorum": 1,
        "expected_version": guard.version}, follow=True)  # "enabled" left out: unticked
    assert "Not in force: the golden set does not pass" in answer.content.decode()
    assert "was changed successfully" not in answer.content.decode()
    guard.refresh_from_db()
    assert (guard.enabled, guard.version) == (True, 1)
    assert PolicyDraft.objects.get(policy=guard).state == "gate_failed"
