"""Roles and tool grants over the API: reads for anyone with a role, writes for governance admins."""

import pytest
from django.contrib.auth.models import Group

from agents.models import Tool
from governance.models import ToolGrant

pytestmark = pytest.mark.django_db


def by_name(response) -> dict:
    return {r["name"]: r for r in response.json()["results"]}


# --- roles ------------------------------------------------------------------------------


def test_roles_list_members_tools_and_what_they_approve(operator):
    response = operator.get("/api/v1/roles/")
    assert response.status_code == 200
    roles = by_name(response)
    assert set(roles) == {"operators", "secops", "compliance", "governance-admins"}
    assert roles["operators"]["members"] == 1
    assert "delete_account" in roles["operators"]["tools"] and len(roles["operators"]["tools"]) == 9
    assert roles["secops"] == {"name": "secops", "members": 1, "tools": [], "approves": ["side-effects-need-secops"]}


def test_it_reads_one_role_by_name(compliance):
    response = compliance.get("/api/v1/roles/secops/")
    assert response.status_code == 200
    assert response.json()["approves"] == ["side-effects-need-secops"]


def test_an_unknown_role_is_a_404(admin):
    assert admin.get("/api/v1/roles/ghosts/").status_code == 404
    assert admin.delete("/api/v1/roles/ghosts/").status_code == 404


def test_someone_without_a_role_cannot_list_roles_or_grants(outsider):
    assert outsider.get("/api/v1/roles/").status_code == 403
    assert outsider.get("/api/v1/grants/").status_code == 403


def test_an_admin_creates_and_deletes_a_role(admin):
    response = admin.post("/api/v1/roles/", {"name": "auditors"}, format="json")
    assert response.status_code == 201
    assert response.json() == {"name": "auditors", "members": 0, "tools": [], "approves": []}
    assert admin.delete("/api/v1/roles/auditors/").status_code == 204
    assert not Group.objects.filter(name="auditors").exists()


def test_a_duplicate_role_is_a_conflict(admin):
    response = admin.post("/api/v1/roles/", {"name": "secops"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


@pytest.mark.parametrize("body, field", [({"name": "a/b"}, "name"), ({}, "name"),
                                         ({"name": "x", "members": 3}, "members")])
def test_a_bad_role_body_is_a_400(admin, body, field):
    response = admin.post("/api/v1/roles/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_a_role_that_approves_for_a_policy_cannot_be_deleted(admin):
    response = admin.delete("/api/v1/roles/secops/")
    assert response.status_code == 409
    assert response.json()["error"]["details"]["policies"] == ["side-effects-need-secops"]
    assert Group.objects.filter(name="secops").exists()


def test_the_governance_admin_role_cannot_be_deleted(admin):
    assert admin.delete("/api/v1/roles/governance-admins/").status_code == 409


@pytest.mark.parametrize("persona", ["operator", "approver", "compliance"])
def test_only_governance_admins_change_roles_and_grants(persona, request):
    client = request.getfixturevalue(persona)
    grant = ToolGrant.objects.filter(role__name="operators").first()
    for response in (
        client.post("/api/v1/roles/", {"name": "auditors"}, format="json"),
        client.delete("/api/v1/roles/compliance/"),
        client.post("/api/v1/grants/", {"role": "compliance", "tool": "calculator"}, format="json"),
        client.delete(f"/api/v1/grants/{grant.pk}/"),
    ):
        assert response.status_code == 403
    assert Group.objects.filter(name="compliance").exists() and not Group.objects.filter(name="auditors").exists()
    assert ToolGrant.objects.filter(pk=grant.pk).exists()


# --- grants -----------------------------------------------------------------------------


def test_grants_list_and_filter_by_role_and_tool(approver):
    body = approver.get("/api/v1/grants/").json()
    assert body["count"] == 9
    assert approver.get("/api/v1/grants/?role=secops").json()["count"] == 0
    [grant] = approver.get("/api/v1/grants/?role=operators&tool=send_email").json()["results"]
    assert (grant["role"], grant["tool"]) == ("operators", "send_email")
    assert {"id", "granted_by", "granted_at"} <= set(grant)


def test_an_admin_grants_a_tool_and_revokes_it(admin):
    response = admin.post("/api/v1/grants/", {"role": "compliance", "tool": "calculator"}, format="json")
    assert response.status_code == 201, response.json()
    grant = response.json()
    assert (grant["role"], grant["tool"], grant["granted_by"]) == ("compliance", "calculator", "admin")
    assert admin.get(f"/api/v1/grants/{grant['id']}/").json()["tool"] == "calculator"
    assert "calculator" in admin.get("/api/v1/roles/compliance/").json()["tools"]

    assert admin.delete(f"/api/v1/grants/{grant['id']}/").status_code == 204
    assert not ToolGrant.objects.filter(role__name="compliance", tool__name="calculator").exists()
    assert admin.delete(f"/api/v1/grants/{grant['id']}/").status_code == 404


def test_a_duplicate_grant_is_a_conflict(admin):
    response = admin.post("/api/v1/grants/", {"role": "operators", "tool": "send_email"}, format="json")
    assert response.status_code == 409
    assert ToolGrant.objects.filter(role__name="operators", tool__name="send_email").count() == 1


@pytest.mark.parametrize("body, field", [
    ({"role": "ghosts", "tool": "calculator"}, "role"),
    ({"role": "compliance", "tool": "no_such_tool"}, "tool"),
    ({"role": "compliance", "tool": "calculator", "granted_by": "approver"}, "granted_by"),
])
def test_a_bad_grant_body_is_a_400(admin, body, field):
    response = admin.post("/api/v1/grants/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert not ToolGrant.objects.filter(role__name="compliance").exists()


def test_an_unknown_grant_is_a_404(admin):
    assert admin.get("/api/v1/grants/999999/").status_code == 404


def test_a_revoked_grant_hides_the_tool_from_the_dry_run(admin):
    grant = ToolGrant.objects.get(role__name="operators", tool=Tool.objects.get(name="delete_account"))
    admin.delete(f"/api/v1/grants/{grant.pk}/")
    result = admin.post("/api/v1/policies/evaluate/",
                        {"agent": "crm-assistant", "input": "Delete the account Initech.", "role": "operators"},
                        format="json").json()
    assert "delete_account" not in [t["name"] for t in result["tools"]]
