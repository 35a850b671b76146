"""The demo loader: everything docs/design.md lists, and loading twice changes nothing."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from agents.models import Agent, AgentVersion, CrmAccount, CrmTicket, Tool
from governance.models import Policy, PolicyVersion, ToolGrant
from runs.demo import demo_load
from skills.models import Skill

pytestmark = pytest.mark.django_db


def _census() -> dict:
    return {
        "users": list(get_user_model().objects.order_by("username").values_list("username", "password")),
        "roles": Group.objects.count(),
        "grants": ToolGrant.objects.count(),
        "tools": list(Tool.objects.values_list("name", "side_effect")),
        "policies": list(Policy.objects.values_list("name", "version", "enabled")),
        "history": PolicyVersion.objects.count(),
        "agent_versions": AgentVersion.objects.count(),
        "skills": list(Skill.objects.values_list("name", "version", "sha256")),
        "accounts": CrmAccount.objects.count(),
        "tickets": CrmTicket.objects.count(),
    }


def test_the_demo_has_what_design_md_lists():
    demo_load()
    census = _census()
    assert [u for u, _ in census["users"]] == ["admin", "approver", "compliance", "operator"]
    assert dict(census["tools"]) == {
        "list_accounts": False, "get_account": False, "get_usage_trend": False, "list_open_tickets": False,
        "compute_health_score": False, "calculator": False, "search_knowledge": False,
        "send_email": True, "delete_account": True,
    }
    assert {p[0]: p[2] for p in census["policies"]} == {
        "no-compensation-questions": True, "churn-risk-playbook": True, "email-etiquette": True,
        "side-effects-need-secops": True, "executive-summary": False,
    }
    assert [s[0] for s in census["skills"]] == ["account-health-review", "churn-risk-playbook", "incident-summary"]
    assert (census["accounts"], census["tickets"]) == (4, 6)
    assert ToolGrant.objects.filter(role__name="operators").count() == 9
    agent = Agent.objects.get(slug="crm-assistant")
    assert agent.current_version.version == 1 and len(agent.current_version.spec["tools"]) == 9
    assert get_user_model().objects.get(username="admin").is_superuser
    assert get_user_model().objects.get(username="operator").check_password("warrant-demo")


def test_loading_the_demo_twice_changes_nothing():
    demo_load()
    before = _census()
    result = demo_load()
    assert _census() == before
    assert result["users_created"] == [] and result["policies_created"] == [] and not result["agent_published"]
