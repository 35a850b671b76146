"""Every cell of the role matrix (tests/api/role_matrix.py): the status it must answer, our error body, and
the write it made or did not make."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from agents.models import Agent, ModelProfile, ModelProfileHealth, Tool, ToolSource
from evals.models import GoldenCase
from governance.models import Policy, ToolGrant
from runs.models import ApprovalRequest, Run, StandingApproval
from skills.models import Skill
from tests.api.role_matrix import BODIES, ERROR_CODES, KNOWN_DEFECTS, MATRIX, NOT_JSON, PERSONAS, SIGNED
from tests.api.role_matrix_world import send

pytestmark = pytest.mark.django_db


def _cells():
    for (method, route), statuses in MATRIX.items():
        for persona, expected in zip(PERSONAS, statuses, strict=True):
            marks = []
            reason = KNOWN_DEFECTS.get((method, route, persona))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(method, route, persona, expected, id=f"{method} {route} [{persona}]", marks=marks)


@pytest.mark.parametrize(("method", "route", "persona", "expected"), list(_cells()))
def test_role_matrix_cell(world, as_persona, method, route, persona, expected):
    url = world.url(method, route)
    response = send(as_persona(persona), method, url, BODIES.get((method, route), {} if method != "GET" else None))
    assert response.status_code == expected, (
        f"{method} {url} as {persona}: expected {expected}, got {response.status_code}: {response.content[:400]!r}"
    )
    if expected in ERROR_CODES and (method, route) not in NOT_JSON:
        error = response.json()["error"]
        codes = {"bad_signature"} if (method, route) in SIGNED else ERROR_CODES[expected]
        assert error["code"] in codes and error["message"], error
    if expected == 401:
        challenge = "Warrant-Signature" if (method, route) in SIGNED else "Token"
        assert response.headers.get("WWW-Authenticate", "").startswith(challenge), dict(response.headers)
    _assert_effect(world, method, route, persona, expected, response)


def _assert_effect(world, method, route, persona, expected, response):
    """An allowed write really happened; a refused one left no trace."""
    allowed = 200 <= expected < 300
    if (method, route) == ("POST", "runs/"):
        assert Run.objects.filter(input="List all accounts.").exists() is allowed
    elif method == "POST" and route.startswith("approvals/{approval_id}/"):
        approval = ApprovalRequest.objects.get(id=world.pending_approval_id)
        if allowed:
            assert approval.status == ("approved" if route.endswith("approve/") else "denied")
            assert approval.decided_by.username == persona
        else:
            assert approval.status == "pending" and approval.decided_by is None
    elif (method, route) == ("POST", "standing-approvals/"):
        assert StandingApproval.objects.filter(reason="matrix", tool="send_email").exists() is allowed
    elif (method, route) == ("POST", "standing-approvals/{standing_id}/revoke/"):
        assert (StandingApproval.objects.get(id=world.standing_approval_id).revoked_at is not None) is allowed
    elif route == "runs/{run_id}/cancel/":
        assert Run.objects.get(id=world.parked_run_id).status == ("cancelled" if allowed else "awaiting_approval")
    elif (method, route) == ("POST", "policies/"):
        assert Policy.objects.filter(name="matrix-new-policy").exists() is allowed
    elif (method, route) == ("DELETE", "policies/{policy_id}/"):
        assert Policy.objects.filter(pk=world.policy_id).exists() is not allowed
    elif (method, route) == ("PATCH", "policies/{policy_id}/"):
        assert (Policy.objects.get(pk=world.policy_id).description == "changed by the matrix") is allowed
    elif (method, route) == ("POST", "roles/"):
        assert Group.objects.filter(name="matrix-new-role").exists() is allowed
    elif (method, route) == ("DELETE", "roles/{name}/"):
        assert Group.objects.filter(name="matrix-role").exists() is not allowed
    elif (method, route) == ("POST", "grants/"):
        assert ToolGrant.objects.filter(role__name="matrix-role", tool__name="get_account").exists() is allowed
    elif (method, route) == ("DELETE", "grants/{grant_id}/"):
        assert ToolGrant.objects.filter(pk=world.grant_id).exists() is not allowed
    elif (method, route) == ("POST", "agents/"):
        assert Agent.objects.filter(slug="matrix-new-agent").exists() is allowed
    elif (method, route) == ("PATCH", "agents/{slug}/"):
        assert (Agent.objects.get(slug="crm-assistant").description == "changed by the matrix") is allowed
    elif (method, route) == ("POST", "agents/{slug}/publish/"):
        assert (Agent.objects.get(slug="matrix-draft").current_version is not None) is allowed
    elif (method, route) == ("POST", "model-profiles/"):
        assert ModelProfile.objects.filter(name="matrix-new-profile").exists() is allowed
    elif (method, route) == ("PATCH", "model-profiles/{name}/"):
        assert (ModelProfile.objects.get(name="scripted").read_timeout == 30) is allowed
    elif (method, route) == ("POST", "model-profiles/{name}/test/"):
        assert ModelProfileHealth.objects.filter(profile_name="scripted", last_success_at__isnull=False).exists() is allowed
    elif (method, route) == ("PATCH", "tools/{name}/"):
        assert (Tool.objects.get(name="calculator").timeout_seconds == 5) is allowed
    elif (method, route) == ("POST", "skills/"):
        assert Skill.objects.filter(name="matrix-new-skill").exists() is allowed
    elif (method, route) == ("PATCH", "skills/{name}/"):
        assert (Skill.objects.get(name="matrix-skill").status == "retired") is allowed
    elif (method, route) == ("POST", "tools/{name}/approve-change/"):
        assert Tool.objects.get(name="matrix-py__add").held is not allowed
    elif (method, route) == ("POST", "tool-sources/"):
        assert ToolSource.objects.filter(name="matrix-new-source").exists() is allowed
    elif (method, route) == ("PATCH", "tool-sources/{name}/"):
        assert (ToolSource.objects.get(name="matrix-py").timeout_seconds == 7) is allowed
    elif (method, route) == ("POST", "tool-sources/{name}/sync/"):
        assert Tool.objects.filter(tool_source__name="matrix-py").exists() is allowed
    elif method == "POST" and route.startswith("evals/case-proposals/{proposal_id}/"):
        from evals.models import GoldenCaseProposal

        pk = world.own_case_proposal_id if route.endswith("withdraw/") else world.case_proposal_id
        outcome = {"approve": "approved", "refuse": "refused", "withdraw": "withdrawn"}[route.rsplit("/", 2)[1]]
        assert GoldenCaseProposal.objects.get(pk=pk).status == (outcome if allowed else "pending")
        assert GoldenCase.objects.get(name="matrix-golden").enabled is not (allowed and outcome == "approved")
    elif method in ("PATCH", "DELETE") and route == "evals/cases/{case_id}/":
        from evals.models import GoldenCaseProposal

        # A proposal (202) when allowed; either way the case itself is as it was.
        assert GoldenCaseProposal.objects.filter(case=world.golden_case, kind={"PATCH": "update", "DELETE": "delete"}[method],
                                                 status="pending").exists() is allowed
        assert GoldenCase.objects.get(pk=world.golden_case_id).description == ""
    elif route.startswith("trust-proposals/{pk}/"):
        from agents.models import TrustProposal

        pk = world.own_trust_proposal_id if route.endswith("withdraw/") else world.trust_proposal_id
        outcome = {"confirm/": "confirmed", "refuse/": "refused", "withdraw/": "withdrawn"}[route.split("/", 2)[2]]
        assert TrustProposal.objects.get(pk=pk).outcome == (outcome if allowed else "pending")
        assert Tool.objects.get(name="list_open_tickets").trusted_output is (allowed and outcome == "confirmed")
    elif (method, route) == ("DELETE", "skills/{name}/"):
        assert (Skill.objects.get(name="matrix-skill").status == "retired") is allowed
    elif (method, route) == ("POST", "triggers/"):
        from triggers.models import Trigger

        assert Trigger.objects.filter(name="matrix-new-trigger").exists() is allowed
    elif (method, route) == ("POST", "triggers/{name}/pause/"):
        from triggers.models import Trigger

        assert Trigger.objects.get(name="matrix-trigger").enabled is not allowed
    elif (method, route) == ("POST", "hooks/{trigger}/"):
        assert not Run.objects.filter(input="unsigned").exists()
    elif (method, route) == ("POST", "service-accounts/"):
        from triggers.models import ServiceAccount

        assert ServiceAccount.objects.filter(user__username="matrix-new-bot").exists() is allowed
    elif (method, route) == ("POST", "service-accounts/{username}/disable/"):
        assert get_user_model().objects.get(username="matrix-bot").is_active is not allowed
    elif method == "POST" and route.startswith("review/rule-proposals/{proposal_id}/"):
        from review.models import SamplingRule, SamplingRuleProposal

        pk = world.own_rule_proposal_id if route.endswith("withdraw/") else world.rule_proposal_id
        outcome = {"approve": "approved", "refuse": "refused", "withdraw": "withdrawn"}[route.rsplit("/", 2)[1]]
        assert SamplingRuleProposal.objects.get(pk=pk).status == (outcome if allowed else "pending")
        assert SamplingRule.objects.get(pk=world.sampling_rule_id).enabled is not (allowed and outcome == "approved")
    elif route.startswith("review/") and method != "GET":
        from review.models import ReviewRecord, SamplingRule, SamplingRuleProposal

        if route == "review/rules/":
            assert SamplingRule.objects.filter(name="matrix-new-rule").exists() is allowed
        elif method == "PATCH":
            assert (SamplingRule.objects.get(pk=world.sampling_rule_id).note == "changed by the matrix") is allowed
        elif method == "DELETE":  # proposed, not deleted
            assert SamplingRule.objects.filter(pk=world.sampling_rule_id).exists()
            assert SamplingRuleProposal.objects.filter(rule_id=world.sampling_rule_id, kind="delete").exists() is allowed
        elif route.endswith("records/"):
            assert ReviewRecord.objects.filter(item_id=world.review_item_id).exists() is allowed
    elif (method, route) == ("POST", "policies/evaluate/") and allowed:
        body = response.json()
        assert {t["name"]: t["needs_approval"] for t in body["tools"]}["delete_account"] is True
    elif method == "GET" and allowed and (method, route) not in NOT_JSON:
        response.json()  # a JSON answer, not an HTML error page


def test_the_matrix_is_complete_and_well_formed():
    for (method, route), statuses in MATRIX.items():
        assert method in {"GET", "POST", "PATCH", "PUT", "DELETE"}, (method, route)
        assert len(statuses) == len(PERSONAS), (method, route)
        assert statuses[0] == 401, f"{method} {route}: every API operation needs credentials"
        if method != "GET":
            assert (method, route) in BODIES or method == "DELETE", f"{method} {route} has no valid body"
    for key in BODIES:
        assert key in MATRIX, f"a body for {key}, which is not in the matrix"
    for method, route, persona in KNOWN_DEFECTS:
        assert (method, route) in MATRIX and persona in PERSONAS
