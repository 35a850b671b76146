"""The tool registry over the API: read by anyone with a role, switched on and off by admins."""

import pytest

from agents.models import Tool
from runs.context import visible_tools
from runs.models import Run

pytestmark = pytest.mark.django_db


def error(response) -> dict:
    return response.json()["error"]


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["name"] for t in response.json()["results"]]


def test_anyone_with_a_role_lists_the_registry(operator):
    response = operator.get("/api/v1/tools/")
    assert response.json()["count"] == Tool.objects.count()
    tool = operator.get("/api/v1/tools/send_email/").json()
    assert tool["side_effect"] is True and tool["enabled"] is True and tool["source"] == "python"


def test_it_filters_by_side_effect_enabled_and_source(compliance):
    assert names(compliance.get("/api/v1/tools/?side_effect=true")) == ["delete_account", "send_email"]
    assert names(compliance.get("/api/v1/tools/?enabled=false")) == []
    assert len(names(compliance.get("/api/v1/tools/?source=python"))) == Tool.objects.count()


def test_a_disabled_tool_shows_as_disabled_and_is_not_shown_to_the_model(admin, operator):
    response = admin.patch("/api/v1/tools/send_email/", {"enabled": False}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["enabled"] is False
    assert operator.get("/api/v1/tools/send_email/").json()["enabled"] is False
    assert names(operator.get("/api/v1/tools/?enabled=false")) == ["send_email"]
    assert "send_email" not in names(operator.get("/api/v1/tools/?enabled=true"))

    operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."}, format="json")
    snapshot = Run.objects.get().snapshot
    assert "send_email" not in visible_tools(snapshot)
    assert "list_accounts" in visible_tools(snapshot)


def test_patch_retunes_a_tool(admin):
    response = admin.patch("/api/v1/tools/calculator/", {"timeout_seconds": 3, "description": "Arithmetic."},
                           format="json")
    assert response.status_code == 200
    assert response.json()["timeout_seconds"] == 3 and response.json()["description"] == "Arithmetic."


@pytest.mark.parametrize("field, value", [
    ("handler", "os.system"), ("name", "renamed"), ("input_schema", {}), ("source", "python"),
    ("created_at", "2020-01-01T00:00:00Z"), ("id", 1), ("surprise", True),
])
def test_patch_refuses_read_only_and_unknown_fields(admin, field, value):
    before = Tool.objects.get(name="calculator").handler
    response = admin.patch("/api/v1/tools/calculator/", {"enabled": False, field: value}, format="json")
    assert response.status_code == 400
    assert list(error(response)["details"]) == [field]
    tool = Tool.objects.get(name="calculator")
    assert tool.enabled is True and tool.handler == before


@pytest.mark.parametrize("value", [0, -1, 601])
def test_patch_validates_the_timeout(admin, value):
    response = admin.patch("/api/v1/tools/calculator/", {"timeout_seconds": value}, format="json")
    assert response.status_code == 400
    assert "timeout_seconds" in error(response)["details"]


def test_only_governance_admins_write(operator, approver, compliance):
    for client in (operator, approver, compliance):
        assert client.patch("/api/v1/tools/send_email/", {"enabled": False}, format="json").status_code == 403
    assert Tool.objects.get(name="send_email").enabled is True


def test_someone_without_a_role_reads_nothing(outsider):
    assert outsider.get("/api/v1/tools/").status_code == 403
    assert outsider.get("/api/v1/tools/send_email/").status_code == 403


def test_an_unknown_tool_is_404(admin):
    assert admin.get("/api/v1/tools/ghost/").status_code == 404
    assert admin.patch("/api/v1/tools/ghost/", {"enabled": False}, format="json").status_code == 404


def test_tools_are_not_deleted_through_the_api(admin):
    assert admin.delete("/api/v1/tools/send_email/").status_code == 405


def test_an_empty_approver_role_is_not_read_as_none(admin):
    response = admin.patch("/api/v1/tools/get_account/", {"approver_role": ""}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"approver_role"}
    assert admin.patch("/api/v1/tools/get_account/", {"approver_role": None}, format="json").status_code == 200


def test_a_number_is_not_a_role_name(admin):
    response = admin.patch("/api/v1/tools/get_account/", {"approver_role": 0}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"approver_role"}


def test_a_tool_that_requires_approval_must_name_its_approver_role(admin):
    # Every run calling it would fail closed (policy_error), and the Policy Lab answered 422 on it.
    response = admin.patch("/api/v1/tools/get_account/", {"requires_approval": True, "approver_role": None},
                           format="json")
    assert response.status_code == 400 and set(error(response)["details"]) == {"approver_role"}
    assert Tool.objects.get(name="get_account").requires_approval is False
    lab = admin.post("/api/v1/policies/evaluate/", {"input": "List all accounts."}, format="json")
    assert lab.status_code == 200
