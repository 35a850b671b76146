"""An agent's per-tool caps and budget role: set over the API and in the workbench, checked, and
frozen into what it publishes."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

NEW_AGENT = {
    "slug": "helpdesk", "name": "Helpdesk", "instructions": "Answer support questions.",
    "model_profile": "scripted", "tools": ["list_open_tickets", "get_account"],
}


def test_caps_and_a_budget_role_are_set_shown_and_published(admin):
    response = admin.post("/api/v1/agents/", NEW_AGENT | {"tool_caps": {"get_account": 2}, "budget_role": "secops"},
                          format="json")
    assert response.status_code == 201, response.content
    assert (response.json()["tool_caps"], response.json()["budget_role"]) == ({"get_account": 2}, "secops")
    spec = admin.post("/api/v1/agents/helpdesk/publish/").json()["spec"]
    assert (spec["tool_caps"], spec["budget_role"]) == ({"get_account": 2}, "secops")
    cleared = admin.patch("/api/v1/agents/helpdesk/", {"tool_caps": {}, "budget_role": None}, format="json")
    assert (cleared.json()["tool_caps"], cleared.json()["budget_role"]) == ({}, None)
    # Without them the spec is the one an agent had before caps existed: no new keys.
    spec = admin.post("/api/v1/agents/helpdesk/publish/").json()["spec"]
    assert "tool_caps" not in spec and "budget_role" not in spec


def test_an_agent_without_caps_publishes_the_spec_it_had(admin):
    before = admin.get("/api/v1/agents/crm-assistant/versions/1/").json()["spec"]
    again = admin.post("/api/v1/agents/crm-assistant/publish/")
    assert again.status_code == 200 and again.json()["spec"] == before


@pytest.mark.parametrize("caps, problem", [
    ({"send_email": 1}, "it does not have send_email"),
    ({"get_account": 0}, "greater than or equal to 1"),
    ({"get_account": "one"}, "valid integer"),
])
def test_a_cap_is_a_positive_count_for_a_tool_the_agent_has(admin, caps, problem):
    response = admin.post("/api/v1/agents/", NEW_AGENT | {"tool_caps": caps}, format="json")
    assert response.status_code == 400 and problem in str(response.json()["error"]["details"]), response.content


def test_dropping_a_capped_tool_is_refused_until_its_cap_goes(admin):
    admin.post("/api/v1/agents/", NEW_AGENT | {"tool_caps": {"get_account": 1}}, format="json")
    response = admin.patch("/api/v1/agents/helpdesk/", {"tools": ["list_open_tickets"]}, format="json")
    assert response.status_code == 400 and "tool_caps" in response.json()["error"]["details"]
    ok = admin.patch("/api/v1/agents/helpdesk/", {"tools": ["list_open_tickets"], "tool_caps": {}}, format="json")
    assert ok.status_code == 200, ok.content


def test_an_unknown_budget_role_is_refused(admin):
    response = admin.post("/api/v1/agents/", NEW_AGENT | {"budget_role": "no-such-role"}, format="json")
    assert response.json()["error"]["details"]["budget_role"] == ["no role named 'no-such-role'"]


def test_the_workbench_checks_caps_against_the_agents_tools(demo):
    from agents.models import Agent, Tool

    client = Client()
    client.force_login(_superuser())
    agent = Agent.objects.get(slug="crm-assistant")
    form = {"slug": agent.slug, "name": agent.name, "description": "", "instructions": agent.instructions,
            "model_profile": agent.model_profile_id, "tools": [Tool.objects.get(name="get_account").pk],
            "output_schema": "null", "max_turns": 12, "max_tool_calls": 20, "max_tokens": 50_000,
            "deadline_seconds": 600, "budget_role": ""}
    url = f"/admin/agents/agent/{agent.pk}/change/"
    refused = client.post(url, form | {"tool_caps": '{"send_email": 1}'})
    assert refused.status_code == 200 and "it does not have send_email" in refused.content.decode()
    saved = client.post(url, form | {"tool_caps": '{"get_account": 1}'})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert Agent.objects.get(pk=agent.pk).tool_caps == {"get_account": 1}


def _superuser():
    from django.contrib.auth.models import User

    return User.objects.create_superuser("budget-admin", "budget-admin@example.com", "x" * 20)
