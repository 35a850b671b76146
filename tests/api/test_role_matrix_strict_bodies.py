"""Mass assignment: fields a client must not set are a 400 naming each of them, and nothing is written."""

import pytest
from django.contrib.auth.models import Group

from agents.models import Agent, AgentVersion, ModelProfile, Tool, ToolSource
from governance.models import Policy, ToolGrant
from runs.models import Receipt, Run
from skills.models import Skill
from tests.api.role_matrix import API, BODIES
from tests.api.role_matrix_world import send, token_client

pytestmark = pytest.mark.django_db


def test_starting_a_run_refuses_status_caller_usage_and_receipt_fields(demo):
    """POST runs/ is strict: forged fields are a 400 that names each of them, and no run exists."""
    forged = {
        "id": "00000000-0000-0000-0000-000000000001", "status": "succeeded", "caller": "admin", "output": "forged",
        "tainted": True, "usage": {"input_tokens": 999}, "hash": "f" * 64, "seq": 999, "receipt_id": "x",
    }
    response = token_client("operator").post(API + "runs/", {"agent": "crm-assistant", "input": "List all accounts.",
                                                             **forged}, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) == set(forged)
    assert not Run.objects.filter(input="List all accounts.", caller__username="operator").exists()


def test_an_approval_decision_refuses_forged_decision_fields(world):
    """approve/deny read only `reason`; who decided comes from the token, never from the body."""
    approval = world.pending_approval
    forged = {"status": "denied", "decided_by": "admin", "decided_at": "2000-01-01T00:00:00Z",
              "approver_role": "compliance", "arguments": {"account_id": "A-100"}, "arguments_sha256": "0" * 64}
    response = token_client("approver").post(API + f"approvals/{approval.id}/approve/", {"reason": "ok", **forged},
                                             format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == set(forged)
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_by is None


def test_a_denial_cannot_be_turned_into_an_approval_by_the_body(world):
    approval = world.pending_approval
    response = token_client("approver").post(API + f"approvals/{approval.id}/deny/",
                                             {"reason": "no", "status": "approved", "decided_by": "approver"},
                                             format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"status", "decided_by"}
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert token_client("approver").post(API + f"approvals/{approval.id}/deny/", {"reason": "no"}, format="json").status_code == 200
    approval.refresh_from_db()
    assert approval.status == "denied"


STRICT_CASES = [
    # (method, route, valid body, forged fields) -> 400 naming every forged field, nothing written.
    pytest.param("POST", "policies/", BODIES[("POST", "policies/")],
                 {"version": 7, "id": 999, "history": [], "sha256": "0" * 64, "created_at": "2000-01-01T00:00:00Z",
                  "status": "approved"}, id="policies"),
    pytest.param("PATCH", "policies/{policy_id}/", {"description": "x"}, {"version": 7, "updated_at": "2000-01-01"},
                 id="policy-patch"),
    pytest.param("POST", "agents/", BODIES[("POST", "agents/")],
                 {"current_version": 7, "version": 7, "sha256": "0" * 64, "created_at": "2000-01-01"}, id="agents"),
    pytest.param("PATCH", "agents/{slug}/", {"description": "x"}, {"slug": "renamed", "current_version": 7},
                 id="agent-patch"),
    pytest.param("POST", "agents/{slug}/publish/", {}, {"version": 7, "sha256": "0" * 64, "published_by": "operator"},
                 id="agent-publish"),
    pytest.param("POST", "model-profiles/", BODIES[("POST", "model-profiles/")],
                 {"api_key": "sk-secret", "version": 7, "id": 1}, id="model-profiles"),
    pytest.param("PATCH", "model-profiles/{name}/", {"read_timeout": 30}, {"name": "renamed", "api_key": "sk-x"},
                 id="model-profile-patch"),
    pytest.param("POST", "skills/", BODIES[("POST", "skills/")],
                 {"version": 7, "sha256": "0" * 64, "name": "other-name", "updated_by": "admin"}, id="skills"),
    pytest.param("PATCH", "skills/{name}/", {"status": "draft"}, {"version": 7, "sha256": "0" * 64}, id="skill-patch"),
    pytest.param("POST", "roles/", BODIES[("POST", "roles/")], {"members": 5, "tools": ["delete_account"]},
                 id="roles"),
    pytest.param("POST", "grants/", BODIES[("POST", "grants/")], {"granted_by": "operator", "id": 1}, id="grants"),
    pytest.param("PATCH", "tools/{name}/", {"enabled": False}, {"name": "renamed", "handler": "os.system",
                                                               "source": "mcp"}, id="tool-patch"),
    pytest.param("POST", "policies/evaluate/", BODIES[("POST", "policies/evaluate/")], {"caller": "operator"},
                 id="policy-evaluate"),
    pytest.param("POST", "tool-sources/", BODIES[("POST", "tool-sources/")],
                 {"auth_token": "sk-secret", "tools": ["x"], "last_synced_at": "2000-01-01"}, id="tool-sources"),
    pytest.param("PATCH", "tool-sources/{name}/", {"timeout_seconds": 7}, {"name": "renamed", "kind": "openapi"},
                 id="tool-source-patch"),
    pytest.param("PATCH", "tools/{name}/", {"enabled": True}, {"held": False, "approved_sha256": "0" * 64,
                                                              "pending_change": None}, id="tool-patch-held"),
]


def _snapshot():
    """Everything the strict endpoints could write."""
    return {
        "policies": list(Policy.objects.order_by("pk").values()),
        "agents": list(Agent.objects.order_by("pk").values()),
        "versions": list(AgentVersion.objects.order_by("pk").values_list("pk", flat=True)),
        "profiles": list(ModelProfile.objects.order_by("pk").values()),
        "skills": list(Skill.objects.order_by("pk").values()),
        "roles": list(Group.objects.order_by("pk").values_list("name", flat=True)),
        "grants": list(ToolGrant.objects.order_by("pk").values_list("pk", flat=True)),
        "tools": list(Tool.objects.order_by("pk").values()),
        "tool_sources": list(ToolSource.objects.order_by("pk").values()),
    }


@pytest.mark.parametrize(("method", "route", "body", "forged"), STRICT_CASES)
def test_strict_endpoints_refuse_forged_fields_by_name(world, method, route, body, forged):
    world.policy, world.skill, world.draft_agent, world.tool_source  # noqa: B018 - the targets exist before the snapshot
    before = _snapshot()
    response = send(token_client("admin"), method, world.url(method, route), {**body, **forged})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(forged) <= set(error["details"]), f"not every forged field is named: {error['details']}"
    assert _snapshot() == before, "a refused body changed something"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("route", ["receipts/", "receipts/{receipt_id}/", "receipts/{receipt_id}/verify/"])
def test_receipts_have_no_write_verbs(world, method, route):
    receipt = world.finished_run.receipt
    before = (receipt.hash, receipt.prev_hash, receipt.seq, receipt.body)
    response = send(token_client("compliance"), method, world.url("GET", route),
                    {"hash": "f" * 64, "prev_hash": "e" * 64, "seq": 999, "body": "{}"})
    assert response.status_code == 405, response.content
    receipt.refresh_from_db()
    assert (receipt.hash, receipt.prev_hash, receipt.seq, receipt.body) == before
    assert Receipt.objects.count() == 1
