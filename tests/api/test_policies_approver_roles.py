"""An approver role with nobody in it: refused for policies, tools and tool sources; flagged when a role
loses its last member."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from governance.models import Policy

pytestmark = pytest.mark.django_db


def _empty_role(name="nobody-home"):
    return Group.objects.create(name=name)


APPROVAL = {"name": "park-for-nobody", "type": "tool_approval", "target_tools": ["send_email"]}


def test_an_approval_policy_for_a_role_without_members_is_refused_saying_why(admin):
    _empty_role()
    response = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": "nobody-home"}, format="json")
    assert response.status_code == 400, response.content
    assert "has no active members" in response.json()["error"]["details"]["approver_role"][0]
    assert not Policy.objects.filter(name="park-for-nobody").exists()
    # Disabled it parks nothing, so it may be kept; enabling it is refused the same way.
    created = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": "nobody-home", "enabled": False}, format="json")
    assert created.status_code == 201
    enabled = admin.patch(f"/api/v1/policies/{created.json()['id']}/", {"enabled": True}, format="json")
    assert enabled.status_code == 400 and "no active members" in str(enabled.json()["error"]["details"])


def test_an_inactive_member_does_not_count(admin):
    role = _empty_role()
    get_user_model().objects.create_user("gone", is_active=False).groups.add(role)
    response = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": role.name}, format="json")
    assert response.status_code == 400


def test_tools_and_tool_sources_refuse_an_empty_approver_role(admin):
    _empty_role()
    tool = admin.patch("/api/v1/tools/send_email/", {"approver_role": "nobody-home"}, format="json")
    assert tool.status_code == 400 and "no active members" in str(tool.json()["error"]["details"])
    source = admin.post("/api/v1/tool-sources/", {"name": "nobodys", "kind": "openapi", "document": {"openapi": "3.0.0"},
                                                  "approver_role": "nobody-home"}, format="json")
    assert source.status_code == 400 and "no active members" in str(source.json()["error"]["details"])


def test_a_role_that_lost_its_last_member_is_flagged_in_readyz_and_the_workbench(admin, client):
    # Removing the last member is not refused (offboarding must never wait): it is flagged.
    secops = Group.objects.get(name="secops")
    secops.user_set.clear()
    ready = client.get("/readyz").json()
    flagged = {(e["kind"], e["name"]) for e in ready["unstaffed_approver_roles"]}
    assert ("policy", "side-effects-need-secops") in flagged
    assert ("setting", "WARRANT_TAINT_APPROVER_ROLE") in flagged
    client.force_login(get_user_model().objects.get(username="admin"))
    page = client.get("/admin/governance/policy/").content.decode()
    assert "Nobody can decide" in page and "&#x27;secops&#x27;, which has no active members" in page
    queue = client.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert "Nobody can decide" in queue


def test_the_policy_form_refuses_an_empty_approver_role_next_to_the_field(admin, client):
    role = _empty_role()
    client.force_login(get_user_model().objects.get(username="admin"))
    answer = client.post("/admin/governance/policy/add/", {
        "name": "park-for-nobody", "type": "tool_approval", "priority": 100, "match_mode": "any", "enabled": "on",
        "target_tools": "send_email", "approver_role": role.pk})
    assert answer.status_code == 200 and "has no active members" in answer.content.decode()
    assert not Policy.objects.filter(name="park-for-nobody").exists()
