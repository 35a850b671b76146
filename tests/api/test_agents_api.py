"""Agents over the API: drafts, publishing, immutable versions, who may do what."""

import pytest
from rest_framework.test import APIClient

from agents.models import AgentVersion
from runs.models import Run

pytestmark = pytest.mark.django_db

NEW_AGENT = {
    "slug": "helpdesk", "name": "Helpdesk", "instructions": "Answer support questions.",
    "model_profile": "scripted", "tools": ["list_open_tickets", "get_account"],
}


def error(response) -> dict:
    return response.json()["error"]


def test_anyone_with_a_role_reads_agents_with_their_published_version(operator):
    response = operator.get("/api/v1/agents/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1 and {"next", "previous"} <= set(body)
    agent = body["results"][0]
    assert agent["slug"] == "crm-assistant" and agent["current_version"] == 1
    assert agent["model_profile"] == "scripted" and "send_email" in agent["tools"]


def test_it_creates_a_draft_that_has_no_version_until_published(admin):
    response = admin.post("/api/v1/agents/", NEW_AGENT, format="json")
    assert response.status_code == 201, response.content
    agent = response.json()
    assert agent["current_version"] is None
    assert agent["tools"] == ["get_account", "list_open_tickets"]
    assert agent["max_turns"] == 12
    assert admin.get("/api/v1/agents/helpdesk/versions/").json()["count"] == 0


def test_a_duplicate_slug_is_a_conflict(admin):
    response = admin.post("/api/v1/agents/", NEW_AGENT | {"slug": "crm-assistant"}, format="json")
    assert response.status_code == 409
    assert error(response)["code"] == "conflict"
    assert error(response)["details"] == {"slug": "crm-assistant"}


def test_publish_freezes_the_draft_and_twice_without_change_returns_the_same_version(admin):
    admin.post("/api/v1/agents/", NEW_AGENT, format="json")
    first = admin.post("/api/v1/agents/helpdesk/publish/")
    assert first.status_code == 201, first.content
    version = first.json()
    assert version["version"] == 1 and version["agent"] == "helpdesk" and version["published_by"] == "admin"
    assert version["spec"]["tools"] == ["get_account", "list_open_tickets"] and len(version["sha256"]) == 64
    again = admin.post("/api/v1/agents/helpdesk/publish/")
    assert again.status_code == 200
    assert again.json() == version
    assert admin.get("/api/v1/agents/helpdesk/").json()["current_version"] == 1


def test_a_changed_draft_publishes_v2_and_v1_and_its_runs_stay_as_they_were(admin, operator):
    operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."}, format="json")
    run = Run.objects.get()
    v1 = admin.get("/api/v1/agents/crm-assistant/versions/1/").json()

    patched = admin.patch("/api/v1/agents/crm-assistant/", {"instructions": "Be brief.", "tools": ["calculator"]},
                          format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["tools"] == ["calculator"] and patched.json()["current_version"] == 1
    published = admin.post("/api/v1/agents/crm-assistant/publish/")
    assert published.status_code == 201
    assert published.json()["version"] == 2 and published.json()["spec"]["instructions"] == "Be brief."

    assert admin.get("/api/v1/agents/crm-assistant/versions/1/").json() == v1
    versions = admin.get("/api/v1/agents/crm-assistant/versions/").json()
    assert [v["version"] for v in versions["results"]] == [2, 1]
    run.refresh_from_db()
    assert run.agent_version.version == 1
    assert run.agent_version.sha256 == v1["sha256"] == AgentVersion.objects.get(agent__slug="crm-assistant", version=1).sha256
    operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "What is 2 + 2?"}, format="json")
    assert Run.objects.order_by("-created_at").first().agent_version.version == 2


def test_patch_takes_tools_and_model_profile_by_name_and_refuses_unknown_ones(admin):
    response = admin.patch("/api/v1/agents/crm-assistant/", {"tools": ["calculator", "launch_missiles"]}, format="json")
    assert response.status_code == 400
    assert "launch_missiles" in str(error(response)["details"]["tools"])
    response = admin.patch("/api/v1/agents/crm-assistant/", {"model_profile": "nope"}, format="json")
    assert response.status_code == 400
    assert "model_profile" in error(response)["details"]
    assert "launch_missiles" not in admin.get("/api/v1/agents/crm-assistant/").json()["tools"]


@pytest.mark.parametrize("field", ["slug", "id", "current_version", "created_at", "version", "sha256", "evil"])
def test_patch_refuses_read_only_and_unknown_fields(admin, field):
    response = admin.patch("/api/v1/agents/crm-assistant/", {"name": "Renamed", field: "x"}, format="json")
    assert response.status_code == 400
    assert list(error(response)["details"]) == [field]
    assert admin.get("/api/v1/agents/crm-assistant/").json()["name"] == "CRM assistant"


def test_publish_takes_no_fields(admin):
    response = admin.post("/api/v1/agents/crm-assistant/publish/", {"version": 7}, format="json")
    assert response.status_code == 400
    assert "version" in error(response)["details"]


def test_it_refuses_an_output_schema_that_is_not_a_json_schema(admin):
    response = admin.patch("/api/v1/agents/crm-assistant/", {"output_schema": {"type": 12}}, format="json")
    assert response.status_code == 400
    assert "output_schema" in error(response)["details"]


@pytest.mark.parametrize("method, path, body", [
    ("post", "/api/v1/agents/", NEW_AGENT),
    ("patch", "/api/v1/agents/crm-assistant/", {"name": "Mine now"}),
    ("post", "/api/v1/agents/crm-assistant/publish/", None),
])
def test_only_governance_admins_write(operator, compliance, approver, method, path, body):
    for client in (operator, compliance, approver):
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 403
        assert error(response)["code"] == "permission_denied"
    assert AgentVersion.objects.filter(agent__slug="crm-assistant").count() == 1


@pytest.mark.parametrize("path", [
    "/api/v1/agents/", "/api/v1/agents/crm-assistant/", "/api/v1/agents/crm-assistant/versions/",
    "/api/v1/agents/crm-assistant/versions/1/",
])
def test_someone_without_a_role_reads_nothing(outsider, path):
    assert outsider.get(path).status_code == 403


def test_anonymous_callers_are_refused(demo):
    assert APIClient().get("/api/v1/agents/").status_code in (401, 403)


@pytest.mark.parametrize("path", [
    "/api/v1/agents/nope/", "/api/v1/agents/nope/versions/", "/api/v1/agents/nope/versions/1/",
    "/api/v1/agents/crm-assistant/versions/9/",
])
def test_unknown_agents_and_versions_are_404(compliance, path):
    response = compliance.get(path)
    assert response.status_code == 404
    assert error(response)["code"] == "not_found"


def test_publishing_an_unknown_agent_is_404(admin):
    assert admin.post("/api/v1/agents/nope/publish/").status_code == 404


def test_agents_are_never_deleted(admin):
    response = admin.delete("/api/v1/agents/crm-assistant/")
    assert response.status_code == 405
    assert error(response)["code"] == "method_not_allowed"
    assert admin.get("/api/v1/agents/crm-assistant/").status_code == 200


def test_budgets_have_upper_bounds(admin):
    response = admin.patch("/api/v1/agents/crm-assistant/", {"deadline_seconds": 10**12}, format="json")
    assert response.status_code == 400 and "deadline_seconds" in response.json()["error"]["details"]


def test_the_schema_says_an_output_schema_is_an_object_or_null(admin):
    schema = admin.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    field = schema["AgentCreateRequest"]["properties"]["output_schema"]
    assert field["type"] == "object" and field["nullable"] is True
    response = admin.patch("/api/v1/agents/crm-assistant/", {"output_schema": None}, format="json")
    assert response.status_code == 200 and response.json()["output_schema"] is None
