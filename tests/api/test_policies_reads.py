"""Reading policies over the API: the paginated, filtered list, one policy, who may read, unknown ids."""

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, ModelProfile
from tests.api.policies import GUARD, policy_id

pytestmark = pytest.mark.django_db


def names(response) -> list[str]:
    return [p["name"] for p in response.json()["results"]]


def test_anyone_with_a_role_lists_the_policies_paginated(operator):
    response = operator.get("/api/v1/policies/")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 5
    guard = next(p for p in body["results"] if p["name"] == "no-compensation-questions")
    assert guard["type"] == "intent_guard"
    assert guard["keywords"] == ["salary", "salaries", "compensation", "payroll"]
    assert guard["version"] == 1 and guard["agents"] == [] and guard["approver_role"] is None


def test_the_list_filters_by_type_enabled_and_agent(admin, demo):
    assert names(admin.get("/api/v1/policies/?type=tool_approval")) == ["side-effects-need-secops"]
    assert names(admin.get("/api/v1/policies/?enabled=false")) == ["executive-summary"]
    other = Agent.objects.create(slug="other", name="Other", instructions="x", model_profile=ModelProfile.objects.first())
    admin.post("/api/v1/policies/", {**GUARD, "agents": ["other"]}, format="json")
    for_crm = names(admin.get("/api/v1/policies/?agent=crm-assistant"))
    for_other = names(admin.get("/api/v1/policies/?agent=other"))
    assert "no-drops" not in for_crm and len(for_crm) == 5
    assert "no-drops" in for_other and len(for_other) == 6
    assert other.policies.count() == 1


def test_an_unknown_filter_value_is_a_400(admin):
    response = admin.get("/api/v1/policies/?type=bogus")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_it_reads_one_policy(compliance):
    response = compliance.get(f"/api/v1/policies/{policy_id('side-effects-need-secops')}/")
    assert response.status_code == 200
    body = response.json()
    assert body["approver_role"] == "secops"
    assert body["target_tools"] == ["send_email", "delete_account"]
    assert body["approval_ttl_seconds"] == 72 * 3600


def test_someone_without_a_role_reads_nothing(outsider, demo):
    for path in ("/api/v1/policies/", f"/api/v1/policies/{policy_id('churn-risk-playbook')}/",
                 f"/api/v1/policies/{policy_id('churn-risk-playbook')}/history/"):
        response = outsider.get(path)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"


def test_an_anonymous_client_is_refused(demo):
    assert APIClient().get("/api/v1/policies/").status_code in (401, 403)


@pytest.mark.parametrize("path", ["/api/v1/policies/999999/", "/api/v1/policies/999999/history/"])
def test_an_unknown_policy_is_a_404(admin, path):
    response = admin.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_patching_or_deleting_an_unknown_policy_is_a_404(admin):
    assert admin.patch("/api/v1/policies/999999/", {"priority": 1}, format="json").status_code == 404
    assert admin.delete("/api/v1/policies/999999/").status_code == 404
