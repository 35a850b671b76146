"""Loosening a tool's approval takes two governance admins; tightening it takes one.

The insider is one governance admin: lifting a tool's requires_approval, or pointing its approver
role (or its source's) at a role of their choosing or at none, frees the calls its approvers stood in
front of. So that is a proposal (a TrustProposal of kind "approval") that changes nothing, confirmed
by a different governance admin (core.four_eyes), and the confirmed proposal names both with the
approval before and after. Requiring approval, or naming a role where there was none, stays one step.
"""

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from agents.models import Tool, ToolSource, TrustProposal
from agents.services import tool_update
from tests.agents.trusting import second_governance_admin

pytestmark = pytest.mark.django_db
User = get_user_model()
TOOL = "/api/v1/tools/delete_account/"


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _admin():
    return User.objects.get(username="admin")


def _approval(tool_name: str = "delete_account") -> tuple[bool, str | None]:
    tool = Tool.objects.select_related("approver_role").get(name=tool_name)
    return tool.requires_approval, tool.approver_role.name if tool.approver_role_id else None


@pytest.fixture
def gated(demo):
    """delete_account requiring secops' approval, as one governance admin may set it: in one step."""
    response = _api(_admin()).patch(TOOL, {"requires_approval": True, "approver_role": "secops"}, format="json")
    assert response.status_code == 200, response.json()
    assert _approval() == (True, "secops") and not TrustProposal.objects.exists()
    return second_governance_admin()


def test_lifting_requires_approval_is_proposed_and_the_proposer_cannot_confirm(gated):
    admin = _api(_admin())
    response = admin.patch(TOOL, {"requires_approval": False, "trust_reason": "too slow"}, format="json")
    assert response.status_code == 202, response.json()
    proposal = response.json()
    assert (proposal["kind"], proposal["subject"], proposal["name"], proposal["state"], proposal["proposed_by"]) == (
        "approval", "tool", "delete_account", "pending", "admin")
    assert (proposal["change"], proposal["was"], proposal["reason"]) == (
        {"requires_approval": False}, {"requires_approval": True, "approver_role": "secops"}, "too slow")
    assert _approval() == (True, "secops")

    refused = admin.post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "second_admin_required"
    assert "admin proposed it" in refused.json()["error"]["message"]
    assert _approval() == (True, "secops") and TrustProposal.objects.get(pk=proposal["id"]).outcome == "pending"
    again = admin.patch(TOOL, {"requires_approval": False}, format="json")
    assert again.status_code == 409 and again.json()["error"]["details"] == {"proposal": proposal["id"]}


def test_a_second_admin_confirms_and_the_proposal_names_both(gated):
    proposal = _api(_admin()).patch(TOOL, {"requires_approval": False, "approver_role": None}, format="json").json()
    confirmed = _api(gated).post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/")
    assert confirmed.status_code == 200, confirmed.json()
    assert (confirmed.json()["state"], confirmed.json()["proposed_by"], confirmed.json()["decided_by"]) == (
        "confirmed", "admin", "gov2")
    assert _approval() == (False, None)
    row = TrustProposal.objects.get(pk=proposal["id"])
    assert (row.proposed_by, row.decided_by, row.change, row.was) == (
        _admin(), gated, {"requires_approval": False, "approver_role": None},
        {"requires_approval": True, "approver_role": "secops"})


@pytest.mark.parametrize("role", ["compliance", None])
def test_changing_or_clearing_the_approver_role_is_a_loosening_too(gated, role):
    body = {"approver_role": role} | ({} if role else {"requires_approval": False})
    response = _api(_admin()).patch(TOOL, body, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["change"]["approver_role"] == role and _approval() == (True, "secops")
    assert _api(gated).post(f"/api/v1/trust-proposals/{response.json()['id']}/confirm/").status_code == 200
    assert _approval() == ((True, "compliance") if role else (False, None))


def test_clearing_the_role_of_a_tool_that_still_requires_approval_is_refused_at_once(gated):
    response = _api(_admin()).patch(TOOL, {"approver_role": None}, format="json")
    assert response.status_code == 400 and "approver_role" in response.json()["error"]["details"]
    assert _approval() == (True, "secops") and not TrustProposal.objects.exists()


def test_the_rest_of_the_patch_is_made_and_tightening_stays_one_step(gated):
    response = _api(_admin()).patch(TOOL, {"requires_approval": False, "timeout_seconds": 3}, format="json")
    assert response.status_code == 202
    assert Tool.objects.get(name="delete_account").timeout_seconds == 3 and _approval() == (True, "secops")
    restated = _api(_admin()).patch(TOOL, {"requires_approval": True, "approver_role": "secops"}, format="json")
    assert restated.status_code == 200
    named = _api(_admin()).patch("/api/v1/tools/send_email/", {"approver_role": "secops"}, format="json")
    assert named.status_code == 200 and _approval("send_email") == (False, "secops")
    assert TrustProposal.objects.count() == 1


def test_one_request_makes_one_proposal(gated):
    admin, url = _api(_admin()), "/api/v1/tools/list_open_tickets/"  # a built-in tool not trusted
    assert admin.patch(url, {"requires_approval": True, "approver_role": "secops"}, format="json").status_code == 200
    response = admin.patch(url, {"requires_approval": False, "trusted_output": True}, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "one_proposal_at_a_time"
    assert _approval("list_open_tickets") == (True, "secops") and not TrustProposal.objects.exists()
    assert Tool.objects.get(name="list_open_tickets").trusted_output is False


def test_an_expired_proposal_is_refused(gated, settings):
    settings.WARRANT = {**settings.WARRANT, "TRUST_PROPOSAL_HOURS": 1}
    proposal = _api(_admin()).patch(TOOL, {"requires_approval": False}, format="json").json()
    TrustProposal.objects.filter(pk=proposal["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = _api(gated).post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/")
    assert response.status_code == 409 and response.json()["error"]["code"] == "request_expired"
    assert _approval() == (True, "secops")
    fresh = _api(_admin()).patch(TOOL, {"requires_approval": False}, format="json")
    assert fresh.status_code == 202 and TrustProposal.objects.get(pk=proposal["id"]).outcome == "expired"


def test_withdraw_and_refuse_change_nothing(gated):
    admin, second = _api(_admin()), _api(gated)
    first = admin.patch(TOOL, {"requires_approval": False}, format="json").json()["id"]
    assert second.post(f"/api/v1/trust-proposals/{first}/withdraw/").status_code == 403
    assert admin.post(f"/api/v1/trust-proposals/{first}/withdraw/").json()["state"] == "withdrawn"
    other = admin.patch(TOOL, {"requires_approval": False}, format="json").json()["id"]
    assert admin.post(f"/api/v1/trust-proposals/{other}/refuse/").status_code == 403
    refused = second.post(f"/api/v1/trust-proposals/{other}/refuse/").json()
    assert (refused["state"], refused["decided_by"]) == ("refused", "gov2") and _approval() == (True, "secops")


def test_a_proposal_made_against_another_approval_is_not_confirmed(gated):
    proposal = _api(_admin()).patch(TOOL, {"approver_role": "compliance"}, format="json").json()
    tool_update(tool=Tool.objects.get(name="delete_account"), values={"approver_role": Group.objects.get(name="operators")})
    response = _api(gated).post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/")
    assert response.status_code == 409 and "changed since it was proposed" in response.json()["error"]["message"]
    assert _approval() == (True, "operators")


def test_a_sources_approver_role_is_changed_by_two(gated):
    admin = _api(_admin())
    created = admin.post("/api/v1/tool-sources/", {"name": "docs", "kind": "openapi", "approver_role": "secops",
                                                   "document": {"openapi": "3.0.0", "paths": {}}}, format="json")
    assert created.status_code == 201, created.json()
    response = admin.patch("/api/v1/tool-sources/docs/", {"approver_role": None, "timeout_seconds": 8}, format="json")
    assert response.status_code == 202, response.json()
    assert (response.json()["change"], response.json()["was"]) == ({"approver_role": None}, {"approver_role": "secops"})
    source = ToolSource.objects.get(name="docs")
    assert (source.approver_role.name, source.timeout_seconds) == ("secops", 8)
    assert _api(gated).post(f"/api/v1/trust-proposals/{response.json()['id']}/confirm/").status_code == 200
    assert ToolSource.objects.get(name="docs").approver_role is None


def test_the_admin_forms_propose_instead_of_saving(gated):
    browser = Client()
    browser.force_login(_admin())
    tool = Tool.objects.get(name="delete_account")
    form = {"name": tool.name, "description": tool.description, "input_schema": json.dumps(tool.input_schema),
            "timeout_seconds": 4, "approver_role": tool.approver_role_id, "enabled": "on"}
    response = browser.post(f"/admin/agents/tool/{tool.pk}/change/",
                            form | ({"trusted_output": "on"} if tool.trusted_output else {}))
    assert response.status_code == 302, response.content.decode()[:2000]
    tool = Tool.objects.get(pk=tool.pk)
    assert (tool.requires_approval, tool.timeout_seconds) == (True, 4)  # unticked: proposed, not saved
    proposal = TrustProposal.objects.get(kind="approval", name="delete_account", outcome="pending")
    assert (proposal.proposed_by, proposal.change) == (_admin(), {"requires_approval": False})


def test_the_platform_stays_one_step(gated):
    tool_update(tool=Tool.objects.get(name="delete_account"), values={"requires_approval": False})
    assert _approval()[0] is False and not TrustProposal.objects.exists()


def test_the_source_form_proposes_clearing_its_approver_role(gated):
    source = ToolSource.objects.create(name="docs", kind="openapi", document={"openapi": "3.0.0", "paths": {}},
                                       approver_role=Group.objects.get(name="secops"))
    browser = Client()
    browser.force_login(_admin())
    response = browser.post(f"/admin/agents/toolsource/{source.pk}/change/", {
        "description": "", "document": json.dumps(source.document), "base_url": "", "timeout_seconds": 6,
        "approver_role": "", "enabled": "on", "env_passthrough": "[]", "auth_header": "", "auth_env": "",
        "command": "[]", "url": "", "path": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    source = ToolSource.objects.get(pk=source.pk)
    assert (source.approver_role.name, source.timeout_seconds) == ("secops", 6)
    proposal = TrustProposal.objects.get(kind="approval", subject="tool_source", name="docs", outcome="pending")
    assert (proposal.change, proposal.was) == ({"approver_role": None}, {"approver_role": "secops"})


def test_the_workbench_lists_the_sealed_loosening_with_its_kind_before_and_after(gated):
    proposal = _api(_admin()).patch(TOOL, {"requires_approval": False}, format="json").json()
    assert _api(gated).post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/").status_code == 200
    browser = Client()
    browser.force_login(_admin())
    page = browser.get("/admin/agents/trustchange/?kind__exact=approval")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Approval loosened" in text and "delete_account" in text
    # The approval as it was and as the confirmation left it, as the chain sealed them.
    assert "&quot;requires_approval&quot;: true" in text and "&quot;requires_approval&quot;: false" in text
    # The gate set again in one step is sealed too (a tightening), and said to be one.
    assert _api(_admin()).patch(TOOL, {"requires_approval": True}, format="json").status_code == 200
    assert "Approval tightened (one step)" in browser.get("/admin/agents/trustchange/").content.decode()
