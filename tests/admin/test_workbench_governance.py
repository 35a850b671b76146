"""The workbench's governance pages: policy actions and history, the policy lab, the roles overview."""

import pytest

from governance.models import Policy, PolicyVersion
from runs.models import Run
from tests.admin.workbench import browser_as, messages_of

pytestmark = pytest.mark.django_db  # starts no run: the test's transaction is enough


def test_enable_and_disable_actions_write_a_version_each(demo):
    client = browser_as("admin")
    # Enabling the executive-summary formatter breaks the list-accounts golden case: its gate refuses it.
    formatter = Policy.objects.get(name="executive-summary")
    refused = client.post("/admin/governance/policy/", {"action": "enable", "_selected_action": [formatter.pk]},
                          follow=True)
    assert "Not in force: the golden set does not pass" in refused.content.decode()
    formatter.refresh_from_db()
    assert not formatter.enabled and formatter.version == 1
    # A policy no golden case depends on: enabled and disabled through its gate, a version each.
    from governance import services

    policy = services.policy_create(values={"name": "quarterly-notes", "type": "playbook", "enabled": False,
                                            "keywords": ["quarterly board pack"], "content": "1. Be brief."})
    client.post("/admin/governance/policy/", {"action": "enable", "_selected_action": [policy.pk]})
    policy.refresh_from_db()
    assert policy.enabled and policy.version == 2
    client.post("/admin/governance/policy/", {"action": "disable", "_selected_action": [policy.pk]})
    assert [v.new_values["enabled"] for v in PolicyVersion.objects.filter(policy=policy).order_by("version")] == [
        False, True, False]
    assert "Disabled" in client.get("/admin/governance/policy/").content.decode()


def test_the_policy_history_shows_a_readable_diff_per_version(demo):
    client = browser_as("admin")
    policy = Policy.objects.get(name="churn-risk-playbook")
    response = client.post(f"/admin/governance/policy/{policy.pk}/change/", {
        "name": policy.name, "type": policy.type, "description": "", "enabled": "on", "priority": 50,
        "keywords": "churn\nchurning\nat risk\nattrition", "match_mode": "any", "regex": "", "target_tools": "",
        "content": policy.content.replace("from the lowest score to the highest", "worst first"), "response": "",
        "expected_version": policy.version,
        "agents": [policy.agents.model.objects.get(slug="crm-assistant").pk],
    })
    assert response.status_code == 302, response.content.decode()[:3000]
    policy.refresh_from_db()
    assert policy.keywords == ["churn", "churning", "at risk", "attrition"] and policy.version == 2
    page = client.get(f"/admin/governance/policy/{policy.pk}/versions/").content.decode()
    latest = page[page.index('id="version-2"'):page.index('id="version-1"')]
    assert "+ added" in latest and "worst first" in latest and "− removed" in latest and "from the lowest score" in latest
    assert "attrition" in latest and "crm-assistant" in latest  # the new agent scoping


def test_the_policy_lab_explains_a_request_and_starts_nothing(demo):
    client = browser_as("admin")
    page = client.get("/admin/governance/policy/lab/", {"input": "Delete the account Initech.", "agent": "crm-assistant",
                                                        "role": "operators"}).content.decode()
    assert "WOULD RUN" in page and "YES, by secops" in page and "side-effects-need-secops" in page
    blocked = client.get("/admin/governance/policy/lab/", {"input": "What is Dana Whitfield's salary?",
                                                           "agent": "crm-assistant", "role": ""}).content.decode()
    assert "BLOCKED" in blocked and "no-compensation-questions" in blocked
    compliance_only = client.get("/admin/governance/policy/lab/", {"input": "Delete the account Initech.",
                                                                   "agent": "crm-assistant", "role": "compliance"})
    text = compliance_only.content.decode()
    assert "delete_account: not granted to the role compliance" in text
    assert Run.objects.count() == 0


def test_the_policy_lab_is_for_governance_admins(demo):
    response = browser_as("compliance").get("/admin/governance/policy/lab/", {"input": "hello"}, follow=True)
    assert "Only governance admins may use the policy lab" in messages_of(response)


def test_the_roles_overview_shows_tools_used_and_approved_per_role(demo):
    page = browser_as("admin").get("/admin/governance/role/overview/").content.decode()
    secops = page[page.index('id="role-secops"'):]
    secops = secops[:secops.index("</section>")]
    assert "no tools" in secops and "send_email, delete_account" in secops and "side-effects-need-secops" in secops
    assert "<td>may use</td><td>approves</td>" in page.replace("\n", "")
