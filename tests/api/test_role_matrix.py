"""The API's role matrix: every operation x every persona -> the status it must answer.

`MATRIX` below is the review document. Each row is one operation (HTTP method and the route
as the URL conf spells it, relative to /api/v1/, with `{kwarg}` for its parameters); each
column is a persona. Every cell is a test case that sends a valid request, against real
objects, as that persona (real `Authorization: Token ...` headers, the way integrators call),
so the status is the permission outcome and nothing else:

    200/201/204  allowed (the write really happens; the transaction is rolled back afterwards)
    401          anonymous: no credentials (with our error body and `WWW-Authenticate: Token`)
    403          known object or endpoint, but the persona's roles forbid the operation
    404          the object is invisible to the persona (someone else's run, receipt, approval)

A new route, or a new method on an existing route, without a reviewed row fails
`test_every_route_and_method_has_a_reviewed_row`; a row whose route is gone fails
`test_every_row_names_an_existing_route`.

Personas (the demo of docs/design.md):
    anonymous   no credentials at all
    operator    role `operators` (may start runs); the caller of every run below
    approver    role `secops` (approves send_email / delete_account)
    compliance  role `compliance` (reads every run and receipt)
    admin       role `governance-admins` AND a superuser
    outsider    logged in, in no role
"""

import re
import string
from datetime import timedelta
from functools import cached_property

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services as agent_services
from agents import sources
from agents.models import Agent, AgentVersion, ModelProfile, ModelProfileHealth, Tool, ToolSource
from evals.models import EvalRun, GoldenCase
from governance import services as governance_services
from governance.models import Policy, ToolGrant
from governance.tokens import token_issue
from runs import services as run_services
from runs.models import ApprovalRequest, Receipt, Run, StandingApproval
from runs.standing import standing_grant
from skills.models import Skill
from skills.services import skill_import

pytestmark = pytest.mark.django_db

API = "/api/v1/"

PERSONAS = ("anonymous", "operator", "approver", "compliance", "admin", "outsider")

# ---------------------------------------------------------------------------------------
# THE MATRIX (review this table, not the code below it)
# ---------------------------------------------------------------------------------------
#                                                   anon  oper  appr  comp  admin outs
MATRIX: dict[tuple[str, str], tuple[int, int, int, int, int, int]] = {
    # --- runs: the operator starts and owns runs; compliance (and superusers) read them all.
    ("GET", "runs/"):                               (401,  200,  200,  200,  200,  200),  # each sees only what they may (outsider: empty)
    ("POST", "runs/"):                              (401,  201,  403,  403,  201,  403),  # runs.add_run; a superuser holds every permission
    ("GET", "runs/{run_id}/"):                      (401,  200,  404,  200,  200,  404),
    ("GET", "runs/{run_id}/events/"):               (401,  200,  404,  200,  200,  404),
    ("POST", "runs/{run_id}/cancel/"):              (401,  200,  404,  403,  403,  404),  # only the caller; who can read it (compliance, superuser) gets 403
    # --- approvals: members of the approver role (secops), never the run's caller, superusers not exempt.
    ("GET", "approvals/"):                          (401,  200,  200,  200,  200,  200),  # filtered to the persona's roles (compliance/superuser: all)
    ("GET", "approvals/{approval_id}/"):            (401,  404,  200,  200,  200,  404),  # one request and its decisions; same visibility as the list
    ("POST", "approvals/{approval_id}/approve/"):   (401,  404,  200,  403,  403,  404),  # operator: not in secops, request invisible
    ("POST", "approvals/{approval_id}/deny/"):      (401,  404,  200,  403,  403,  404),  # compliance/admin see it, may not decide it
    # --- standing approvals: granted by members of the role a policy asks (superusers not exempt); revoked by
    # the granter, the role's members or a superuser; seen by the role's members and compliance.
    ("GET", "standing-approvals/"):                 (401,  200,  200,  200,  200,  200),  # filtered (operator/outsider: empty)
    ("POST", "standing-approvals/"):                (401,  403,  201,  403,  403,  403),
    ("GET", "standing-approvals/{standing_id}/"):   (401,  404,  200,  200,  200,  404),
    ("POST", "standing-approvals/{standing_id}/revoke/"): (401, 404, 200, 403, 200, 404),  # compliance reads it, may not revoke
    # --- receipts: read-only; compliance reads all, an owner reads their own.
    ("GET", "receipts/"):                           (401,  200,  200,  200,  200,  200),  # filtered (approver/outsider: empty)
    ("GET", "receipts/export/"):                    (401,  200,  200,  200,  200,  200),  # filtered (approver/outsider: empty file)
    ("GET", "receipts/{receipt_id}/"):              (401,  200,  404,  200,  200,  404),
    ("GET", "receipts/{receipt_id}/verify/"):       (401,  200,  404,  200,  200,  404),
    ("GET", "receipts/keys/"):                      (401,  200,  200,  200,  200,  200),  # public keys: anyone logged in
    # --- policies: anyone with a role reads; governance admins write and dry-run.
    ("GET", "policies/"):                           (401,  200,  200,  200,  200,  403),
    ("POST", "policies/"):                          (401,  403,  403,  403,  201,  403),
    ("POST", "policies/evaluate/"):                 (401,  403,  403,  403,  200,  403),
    ("GET", "policies/{policy_id}/"):               (401,  200,  200,  200,  200,  403),
    ("PATCH", "policies/{policy_id}/"):             (401,  403,  403,  403,  200,  403),
    ("DELETE", "policies/{policy_id}/"):            (401,  403,  403,  403,  204,  403),
    ("GET", "policies/{policy_id}/history/"):       (401,  200,  200,  200,  200,  403),
    # --- policy drafts (governance.drafts): read as policies are; proposed, gated, activated by governance admins
    ("GET", "policies/drafts/"):                    (401,  200,  200,  200,  200,  403),
    ("POST", "policies/drafts/"):                   (401,  403,  403,  403,  201,  403),
    ("GET", "policies/drafts/{draft_id}/"):         (401,  200,  200,  200,  200,  403),
    ("POST", "policies/drafts/{draft_id}/gate/"):   (401,  403,  403,  403,  200,  403),  # the golden set, before and after
    ("POST", "policies/drafts/{draft_id}/activate/"): (401, 403,  403,  403,  200,  403),  # in force when the gate passes
    ("POST", "policies/drafts/{draft_id}/discard/"): (401,  403,  403,  403,  200,  403),
    ("POST", "policies/evaluate/golden/"):          (401,  403,  403,  403,  200,  403),  # the Lab's trial: nothing saved
    # --- roles and tool grants
    ("GET", "roles/"):                              (401,  200,  200,  200,  200,  403),
    ("POST", "roles/"):                             (401,  403,  403,  403,  201,  403),
    ("GET", "roles/{name}/"):                       (401,  200,  200,  200,  200,  403),
    ("DELETE", "roles/{name}/"):                    (401,  403,  403,  403,  204,  403),
    ("GET", "grants/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "grants/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "grants/{grant_id}/"):                  (401,  200,  200,  200,  200,  403),
    ("DELETE", "grants/{grant_id}/"):               (401,  403,  403,  403,  204,  403),
    # --- agents (by slug) and their published versions
    ("GET", "agents/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "agents/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "agents/{slug}/"):                      (401,  200,  200,  200,  200,  403),
    ("PATCH", "agents/{slug}/"):                    (401,  403,  403,  403,  200,  403),
    ("POST", "agents/{slug}/publish/"):             (401,  403,  403,  403,  201,  403),
    ("GET", "agents/{slug}/versions/"):             (401,  200,  200,  200,  200,  403),
    ("GET", "agents/{slug}/versions/{version}/"):   (401,  200,  200,  200,  200,  403),
    # --- model profiles (by name)
    ("GET", "model-profiles/"):                     (401,  200,  200,  200,  200,  403),
    ("POST", "model-profiles/"):                    (401,  403,  403,  403,  201,  403),
    ("GET", "model-profiles/{name}/"):              (401,  200,  200,  200,  200,  403),
    ("PATCH", "model-profiles/{name}/"):            (401,  403,  403,  403,  200,  403),
    ("POST", "model-profiles/{name}/test/"):        (401,  403,  403,  403,  200,  403),  # calls the model server: admins only
    # --- the tool registry (by name)
    ("GET", "tools/"):                              (401,  200,  200,  200,  200,  403),
    ("GET", "tools/{name}/"):                       (401,  200,  200,  200,  200,  403),
    ("PATCH", "tools/{name}/"):                     (401,  403,  403,  403,  200,  403),
    ("POST", "tools/{name}/approve-change/"):       (401,  403,  403,  403,  200,  403),  # re-approve a held tool
    # --- tool sources (by name): infrastructure, governance admins only, reads included
    ("GET", "tool-sources/"):                       (401,  403,  403,  403,  200,  403),
    ("POST", "tool-sources/"):                      (401,  403,  403,  403,  201,  403),
    ("GET", "tool-sources/{name}/"):                (401,  403,  403,  403,  200,  403),
    ("PATCH", "tool-sources/{name}/"):              (401,  403,  403,  403,  200,  403),
    ("POST", "tool-sources/{name}/sync/"):          (401,  403,  403,  403,  200,  403),
    # --- trust proposals: marking trusted takes a second governance admin (agents.trust)
    ("GET", "trust-proposals/"):                    (401,  403,  403,  403,  200,  403),
    ("POST", "trust-proposals/{pk}/confirm/"):      (401,  403,  403,  403,  200,  403),  # proposed by another admin
    ("POST", "trust-proposals/{pk}/refuse/"):       (401,  403,  403,  403,  200,  403),
    ("POST", "trust-proposals/{pk}/withdraw/"):     (401,  403,  403,  403,  200,  403),  # the admin's own proposal
    # --- skills (by name); DELETE retires
    ("GET", "skills/"):                             (401,  200,  200,  200,  200,  403),
    ("POST", "skills/"):                            (401,  403,  403,  403,  201,  403),
    ("GET", "skills/{name}/"):                      (401,  200,  200,  200,  200,  403),
    ("PATCH", "skills/{name}/"):                    (401,  403,  403,  403,  200,  403),
    ("DELETE", "skills/{name}/"):                   (401,  403,  403,  403,  204,  403),
    # --- API tokens: everyone their own only; another's token is 404 to all, superusers included.
    ("GET", "tokens/"):                             (401,  200,  200,  200,  200,  200),  # each lists only their own
    ("POST", "tokens/"):                            (401,  403,  403,  403,  403,  403),  # a token cannot mint tokens (session only)
    ("GET", "tokens/{public_id}/"):                 (401,  200,  404,  404,  404,  404),  # the operator's token
    ("DELETE", "tokens/{public_id}/"):              (401,  204,  404,  404,  404,  404),  # revoke: its owner only
    # --- OpenAPI: anyone logged in
    ("GET", "schema/"):                             (401,  200,  200,  200,  200,  200),
    ("GET", "docs/"):                               (401,  200,  200,  200,  200,  200),
    # --- the dashboard's figures (review/): compliance, governance admins and superusers
    ("GET", "dashboard/summary/"):                  (401,  403,  403,  200,  200,  403),
    # --- compliance review (review/): compliance, governance admins and superusers; records by the assignee only
    ("GET", "review/rules/"):                       (401,  403,  403,  200,  200,  403),
    ("POST", "review/rules/"):                      (401,  403,  403,  201,  201,  403),
    ("GET", "review/rules/{rule_id}/"):             (401,  403,  403,  200,  200,  403),
    ("PATCH", "review/rules/{rule_id}/"):           (401,  403,  403,  200,  200,  403),
    ("DELETE", "review/rules/{rule_id}/"):          (401,  403,  403,  204,  204,  403),
    ("GET", "review/queue/"):                       (401,  403,  403,  200,  200,  403),
    ("GET", "review/items/{item_id}/"):             (401,  403,  403,  200,  200,  403),
    ("POST", "review/items/{item_id}/assign/"):     (401,  403,  403,  200,  200,  403),
    ("POST", "review/items/{item_id}/records/"):    (401,  403,  403,  201,  403,  403),  # the assignee (compliance) only
    ("GET", "review/verify/"):                      (401,  403,  403,  200,  200,  403),
    # --- evals (evals/): golden cases written by governance admins; governance admins and compliance read and run them
    ("GET", "evals/cases/"):                        (401,  403,  403,  200,  200,  403),
    ("POST", "evals/cases/"):                       (401,  403,  403,  403,  201,  403),
    ("GET", "evals/cases/{case_id}/"):              (401,  403,  403,  200,  200,  403),
    ("PATCH", "evals/cases/{case_id}/"):            (401,  403,  403,  403,  202,  403),  # a proposal a second admin approves
    ("DELETE", "evals/cases/{case_id}/"):           (401,  403,  403,  403,  202,  403),  # a proposal
    ("POST", "evals/cases/{case_id}/record/"):      (401,  403,  403,  403,  202,  403),  # a proposal; 409 when the case would fail
    ("GET", "evals/case-proposals/"):               (401,  403,  403,  200,  200,  403),
    ("GET", "evals/case-proposals/{proposal_id}/"): (401,  403,  403,  200,  200,  403),
    ("POST", "evals/case-proposals/{proposal_id}/approve/"):  (401, 403, 403, 403, 200, 403),  # proposed by another admin
    ("POST", "evals/case-proposals/{proposal_id}/refuse/"):   (401, 403, 403, 403, 200, 403),
    ("POST", "evals/case-proposals/{proposal_id}/withdraw/"): (401, 403, 403, 403, 200, 403),  # the admin's own
    ("GET", "evals/cases/{case_id}/versions/"):     (401,  403,  403,  200,  200,  403),
    ("GET", "evals/runs/"):                         (401,  403,  403,  200,  200,  403),
    ("POST", "evals/runs/"):                        (401,  403,  403,  201,  201,  403),  # runs in isolation: no run, no side effect
    # --- triggers (triggers/): anyone with a role reads; governance admins write, pause, resume, rotate
    ("GET", "triggers/"):                           (401,  200,  200,  200,  200,  403),
    ("POST", "triggers/"):                          (401,  403,  403,  403,  201,  403),
    ("GET", "triggers/{name}/"):                    (401,  200,  200,  200,  200,  403),
    ("PATCH", "triggers/{name}/"):                  (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/pause/"):             (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/resume/"):            (401,  403,  403,  403,  200,  403),
    ("POST", "triggers/{name}/rotate-secret/"):     (401,  403,  403,  403,  200,  403),
    ("GET", "triggers/{name}/fires/"):              (401,  200,  200,  200,  200,  403),
    # --- service accounts (triggers/): who the headless identities are is governance admins' alone
    ("GET", "service-accounts/"):                   (401,  403,  403,  403,  200,  403),
    ("POST", "service-accounts/"):                  (401,  403,  403,  403,  201,  403),
    ("GET", "service-accounts/{username}/"):        (401,  403,  403,  403,  200,  403),
    ("POST", "service-accounts/{username}/disable/"): (401, 403, 403,  403,  200,  403),
    ("POST", "service-accounts/{username}/enable/"): (401,  403,  403,  403,  200,  403),
    # a webhook delivery is authenticated by its HMAC signature only: a token is no credential there
    ("POST", "hooks/{trigger}/"):                   (401,  401,  401,  401,  401,  401),
    ("GET", "evals/runs/{run_id}/"):                (401,  403,  403,  200,  200,  403),
}

# Cells whose expected status above is the CORRECT one but the code answers otherwise today:
# (method, route, persona) -> reason. Each becomes xfail(strict=True), so fixing the defect
# turns the case green only after this entry is removed.
KNOWN_DEFECTS: dict[tuple[str, str, str], str] = {}

# Which object each route parameter names, per resource (attributes of `World`).
TARGETS = {
    "runs": {"run_id": "finished_run_id"},
    "approvals": {"approval_id": "pending_approval_id"},
    "standing-approvals": {"standing_id": "standing_approval_id"},
    "receipts": {"receipt_id": "receipt_id"},
    "policies": {"policy_id": "policy_id", "draft_id": "policy_draft_id"},
    "roles": {"name": "role_name"},
    "grants": {"grant_id": "grant_id"},
    "agents": {"slug": "agent_slug", "version": "agent_version"},
    "model-profiles": {"name": "profile_name"},
    "tools": {"name": "tool_name"},
    "tool-sources": {"name": "tool_source_name"},
    "skills": {"name": "skill_name"},
    "tokens": {"public_id": "operator_token_id"},
    "triggers": {"name": "trigger_name"},
    "hooks": {"trigger": "trigger_name"},
    "service-accounts": {"username": "service_account_name"},
    "evals": {"case_id": "golden_case_id", "run_id": "eval_run_id", "proposal_id": "case_proposal_id"},
    "review": {"rule_id": "sampling_rule_id", "item_id": "review_item_id"},
    "trust-proposals": {"pk": "trust_proposal_id"},
}
TARGET_OVERRIDES = {
    # A finished run cannot be cancelled (409): cancel the parked one, still in flight.
    ("POST", "runs/{run_id}/cancel/"): {"run_id": "parked_run_id"},
    # Publishing the unchanged demo agent answers 200 (nothing new); a draft gives the real 201.
    ("POST", "agents/{slug}/publish/"): {"slug": "draft_agent_slug"},
    # Only a held tool has a change to approve.
    ("POST", "tools/{name}/approve-change/"): {"name": "held_tool_name"},
    # Only its proposer withdraws a proposal: the admin's own.
    ("POST", "trust-proposals/{pk}/withdraw/"): {"pk": "own_trust_proposal_id"},
    ("POST", "evals/case-proposals/{proposal_id}/withdraw/"): {"proposal_id": "own_case_proposal_id"},
}

SKILL_TEXT = """---
name: {name}
description: A skill the role matrix creates.
tags: [matrix]
allowed-tools: [calculator]
---

1. Call `calculator`.
"""

# Valid bodies, so that the status is the permission outcome. Keyed like MATRIX.
BODIES = {
    ("POST", "runs/"): {"agent": "crm-assistant", "input": "List all accounts."},
    ("POST", "runs/{run_id}/cancel/"): {},
    ("POST", "approvals/{approval_id}/approve/"): {"reason": "matrix"},
    ("POST", "approvals/{approval_id}/deny/"): {"reason": "matrix"},
    ("POST", "standing-approvals/"): {"tool": "send_email", "role": "secops", "reason": "matrix",
                                      "arguments": {"to": {"equals": "dana@example.com"}, "subject": {"equals": "Hi"},
                                                    "body": {"in": ["Hello", "Hi"]}},
                                      "expires_at": (timezone.now() + timedelta(days=7)).isoformat()},
    ("POST", "standing-approvals/{standing_id}/revoke/"): {"reason": "matrix"},
    ("POST", "policies/"): {"name": "matrix-new-policy", "type": "playbook", "keywords": ["matrix"],
                            "content": "1. Call `list_accounts`."},
    ("POST", "policies/evaluate/"): {"agent": "crm-assistant", "input": "Delete the account Initech."},
    ("PATCH", "policies/{policy_id}/"): {"description": "changed by the matrix"},
    ("POST", "policies/drafts/"): {"policy": None, "values": {"name": "matrix-drafted", "type": "playbook",
                                                              "keywords": ["matrix"], "content": "1. Answer."}},
    ("POST", "policies/drafts/{draft_id}/gate/"): {},
    ("POST", "policies/drafts/{draft_id}/activate/"): {},
    ("POST", "policies/drafts/{draft_id}/discard/"): {},
    ("POST", "policies/evaluate/golden/"): {"values": {"name": "matrix-trial", "type": "playbook",
                                                       "keywords": ["matrix"], "content": "1. Answer."}},
    ("POST", "roles/"): {"name": "matrix-new-role"},
    ("POST", "grants/"): {"role": "matrix-role", "tool": "get_account"},
    ("POST", "agents/"): {"slug": "matrix-new-agent", "name": "Matrix agent", "instructions": "Answer.",
                          "model_profile": "scripted", "tools": ["calculator"]},
    ("PATCH", "agents/{slug}/"): {"description": "changed by the matrix"},
    ("POST", "agents/{slug}/publish/"): {},
    ("POST", "model-profiles/"): {"name": "matrix-new-profile", "backend": "scripted", "model": "scripted-1"},
    ("PATCH", "model-profiles/{name}/"): {"read_timeout": 30},
    ("POST", "model-profiles/{name}/test/"): {},
    ("PATCH", "tools/{name}/"): {"timeout_seconds": 5},
    ("POST", "skills/"): {"source": SKILL_TEXT.format(name="matrix-new-skill")},
    ("PATCH", "skills/{name}/"): {"status": "retired"},
    ("POST", "tools/{name}/approve-change/"): {},
    ("POST", "tool-sources/"): {"name": "matrix-new-source", "kind": "python", "path": "tests.tools.pyfuncs"},
    ("PATCH", "tool-sources/{name}/"): {"timeout_seconds": 7},
    ("POST", "tool-sources/{name}/sync/"): {},
    ("POST", "trust-proposals/{pk}/confirm/"): {},
    ("POST", "trust-proposals/{pk}/refuse/"): {},
    ("POST", "trust-proposals/{pk}/withdraw/"): {},
    ("POST", "tokens/"): {"name": "matrix"},
    ("POST", "evals/cases/"): {"agent": "crm-assistant", "name": "matrix-case", "input": "List all accounts.",
                               "roles": ["operators"], "expected_status": "succeeded"},
    ("PATCH", "evals/cases/{case_id}/"): {"description": "changed by the matrix"},
    ("POST", "evals/cases/{case_id}/record/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/approve/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/refuse/"): {},
    ("POST", "evals/case-proposals/{proposal_id}/withdraw/"): {},
    ("POST", "evals/runs/"): {"agent": "crm-assistant"},
    ("POST", "review/rules/"): {"name": "matrix-new-rule", "percentage": 10, "always": ["denial"]},
    ("PATCH", "review/rules/{rule_id}/"): {"note": "changed by the matrix"},
    ("POST", "review/items/{item_id}/assign/"): {"assignee": "compliance"},
    ("POST", "review/items/{item_id}/records/"): {"record_kind": "sign_off", "note": "matrix"},
    ("POST", "triggers/"): {"name": "matrix-new-trigger", "kind": "webhook", "agent": "crm-assistant",
                            "service_account": "matrix-bot", "input_template": "{{ payload.text }}"},
    ("PATCH", "triggers/{name}/"): {"description": "changed by the matrix"},
    ("POST", "triggers/{name}/pause/"): {},
    ("POST", "triggers/{name}/resume/"): {},
    ("POST", "triggers/{name}/rotate-secret/"): {},
    ("POST", "hooks/{trigger}/"): {"text": "unsigned"},
    ("POST", "service-accounts/"): {"username": "matrix-new-bot", "roles": ["operators"]},
    ("POST", "service-accounts/{username}/disable/"): {},
    ("POST", "service-accounts/{username}/enable/"): {},
}
# Authenticated by a signature, not a token: their 401 is a bad signature, challenged as such.
SIGNED = {("POST", "hooks/{trigger}/")}

# Error codes of our one error body, by status.
ERROR_CODES = {401: {"not_authenticated"}, 403: {"permission_denied", "forbidden"}, 404: {"not_found"}}
QUERIES = {("GET", "receipts/export/"): "?format=jsonl"}  # the export requires its format
NOT_JSON = {("GET", "schema/"), ("GET", "docs/"), ("GET", "receipts/export/")}  # YAML; HTML viewer; JSON lines


# ---------------------------------------------------------------------------------------
# Real objects, created on demand (each test runs in its own rolled-back transaction, so a
# write in one cell never touches the objects of another).
# ---------------------------------------------------------------------------------------


def _user(username):
    return get_user_model().objects.get(username=username)


class World:
    """The objects the cells act on; each is created the first time a cell needs it."""

    @cached_property
    def finished_run(self) -> Run:
        run, _ = run_services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                        caller=_user("operator"))
        run_services.run_advance(run_id=run.id)
        run.refresh_from_db()
        assert run.status == "succeeded" and Receipt.objects.filter(run=run).exists()
        return run

    @cached_property
    def parked_run(self) -> Run:
        # In a non-transactional test on-commit enqueues never fire: the test plays the worker.
        run, _ = run_services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                        caller=_user("operator"))
        run_services.run_advance(run_id=run.id)
        run.refresh_from_db()
        assert run.status == "awaiting_approval"
        return run

    @cached_property
    def pending_approval(self) -> ApprovalRequest:
        approval = ApprovalRequest.objects.get(run=self.parked_run, status="pending")
        assert approval.approver_role.name == "secops"
        return approval

    @cached_property
    def standing_approval(self) -> StandingApproval:
        return standing_grant(user=_user("approver"), tool="delete_account", agent=None, role="secops",
                              arguments={"account_id": {"equals": "A-400"}}, reason="matrix", via="session",
                              expires_at=timezone.now() + timedelta(days=1))

    @cached_property
    def policy(self) -> Policy:
        return governance_services.policy_create(values={
            "name": "matrix-policy", "type": "playbook", "keywords": ["matrixword"],
            "content": "1. Call `list_accounts`."}, user=_user("admin"))

    @cached_property
    def role(self) -> Group:
        return Group.objects.create(name="matrix-role")

    @cached_property
    def grant(self) -> ToolGrant:
        return governance_services.grant_create(role=self.role, tool=Tool.objects.get(name="calculator"),
                                                user=_user("admin"))

    @cached_property
    def skill(self) -> Skill:
        return skill_import(text=SKILL_TEXT.format(name="matrix-skill"), user=_user("admin"))[0]

    @cached_property
    def tool_source(self) -> ToolSource:
        return sources.tool_source_create(values={"name": "matrix-py", "kind": "python", "path": "tests.tools.pyfuncs"})

    @cached_property
    def held_tool(self) -> Tool:
        sources.tool_source_sync(source=self.tool_source)
        tool = Tool.objects.get(name="matrix-py__add")
        tool.held, tool.pending_change = True, {"description": "Add two numbers.", "input_schema": tool.input_schema,
                                                "sha256": "0" * 64, "binding": tool.binding, "handler": tool.handler}
        tool.save()
        return tool

    @cached_property
    def draft_agent(self) -> Agent:
        return agent_services.agent_create(values={"slug": "matrix-draft", "name": "Matrix draft",
                                                   "instructions": "Answer.", "model_profile": "scripted"})

    @cached_property
    def golden_case(self) -> GoldenCase:
        return GoldenCase.objects.create(agent=Agent.objects.get(slug="crm-assistant"), name="matrix-golden",
                                         input="List all accounts.", roles=["operators"], expected_status="succeeded")

    @cached_property
    def case_proposal(self):
        """Disabling the matrix's golden case, proposed by a governance admin other than the admin persona."""
        from evals.proposals import propose

        other, _ = get_user_model().objects.get_or_create(username="matrix-gov-cases")
        other.groups.add(Group.objects.get(name="governance-admins"))
        return propose(self.golden_case, "update", user=other, changes={"enabled": False})

    @cached_property
    def own_case_proposal(self):
        from evals.proposals import propose

        return propose(self.golden_case, "delete", user=_user("admin"))

    case_proposal_id = property(lambda self: self.case_proposal.pk)
    own_case_proposal_id = property(lambda self: self.own_case_proposal.pk)

    @cached_property
    def eval_run(self) -> EvalRun:
        return EvalRun.objects.create(threshold=1.0)

    @cached_property
    def sampling_rule(self):
        from review.models import SamplingRule

        return SamplingRule.objects.create(name="matrix-rule", percentage=100)

    @cached_property
    def review_item(self):
        # Sampled as any run is (the rule samples every run), and assigned to compliance.
        from review.models import ReviewItem
        from review.records import review_assign

        self.sampling_rule  # noqa: B018 - the rule must exist before the run is sealed
        run, _ = run_services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                        caller=_user("operator"))
        run_services.run_advance(run_id=run.id)
        return review_assign(item=ReviewItem.objects.get(run=run), assignee=_user("compliance"),
                             by=_user("compliance"))

    # What the route parameters name.
    finished_run_id = property(lambda self: self.finished_run.id)
    parked_run_id = property(lambda self: self.parked_run.id)
    pending_approval_id = property(lambda self: self.pending_approval.id)
    standing_approval_id = property(lambda self: self.standing_approval.id)
    receipt_id = property(lambda self: self.finished_run.receipt.id)
    policy_id = property(lambda self: self.policy.pk)

    @cached_property
    def policy_draft(self):
        from governance.drafts import draft_propose

        return draft_propose(policy=self.policy, values={"description": "drafted by the matrix"}, user=_user("admin"))

    policy_draft_id = property(lambda self: self.policy_draft.pk)
    role_name = property(lambda self: self.role.name)
    grant_id = property(lambda self: self.grant.pk)
    agent_slug = property(lambda self: Agent.objects.get(slug="crm-assistant").slug)
    agent_version = property(lambda self: Agent.objects.get(slug="crm-assistant").current_version.version)
    draft_agent_slug = property(lambda self: self.draft_agent.slug)
    profile_name = property(lambda self: ModelProfile.objects.get(name="scripted").name)
    tool_name = property(lambda self: Tool.objects.get(name="calculator").name)
    skill_name = property(lambda self: self.skill.name)
    tool_source_name = property(lambda self: self.tool_source.name)
    held_tool_name = property(lambda self: self.held_tool.name)
    operator_token_id = property(lambda self: self.operator_token.public_id)
    golden_case_id = property(lambda self: self.golden_case.pk)
    eval_run_id = property(lambda self: self.eval_run.pk)
    sampling_rule_id = property(lambda self: self.sampling_rule.pk)
    review_item_id = property(lambda self: self.review_item.pk)

    @cached_property
    def trust_proposal(self):
        """Marking a built-in tool trusted, proposed by a governance admin other than the admin persona."""
        from agents.trust import trust_propose

        other = get_user_model().objects.create_user("matrix-gov")
        other.groups.add(Group.objects.get(name="governance-admins"))
        return trust_propose(target=Tool.objects.get(name="list_open_tickets"), user=other, reason="matrix")

    @cached_property
    def own_trust_proposal(self):
        from agents.trust import trust_propose

        return trust_propose(target=self.tool_source, user=_user("admin"), reason="matrix")

    trust_proposal_id = property(lambda self: self.trust_proposal.pk)
    own_trust_proposal_id = property(lambda self: self.own_trust_proposal.pk)

    @cached_property
    def trigger_service_account(self):
        from triggers.services import service_account_create

        return service_account_create(username="matrix-bot", roles=["operators"])

    @cached_property
    def trigger(self):
        from triggers.services import trigger_create

        return trigger_create(name="matrix-trigger", kind="webhook", agent="crm-assistant",
                              input_template="{{ payload.text }}", service_account=self.trigger_service_account)[0]

    trigger_name = property(lambda self: self.trigger.name)
    service_account_name = property(lambda self: self.trigger_service_account.user.username)

    @cached_property
    def operator_token(self):
        return token_issue(user=_user("operator"), via="command", issued_by="test")[0]

    def url(self, method: str, route: str) -> str:
        names = [field for _, field, _, _ in string.Formatter().parse(route) if field]
        targets = TARGETS.get(route.split("/")[0], {}) | TARGET_OVERRIDES.get((method, route), {})
        url = API + route.format(**{name: getattr(self, targets[name]) for name in names})
        return url + QUERIES.get((method, route), "")


@pytest.fixture
def world(demo):
    # The grant row POSTs for matrix-role, so the role must exist whoever asks.
    w = World()
    w.role  # noqa: B018 - created up front: the POST grants/ body names it
    w.trigger_service_account  # noqa: B018 - the POST triggers/ body names it
    return w


def _client(username: str | None) -> APIClient:
    client = APIClient()
    if username is not None:
        _, key = token_issue(user=_user(username), via="command", issued_by="test")
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def as_persona(demo):
    if not get_user_model().objects.filter(username="outsider").exists():
        get_user_model().objects.create_user("outsider", password="x")
    return lambda persona: _client(None if persona == "anonymous" else persona)


def _send(client: APIClient, method: str, url: str, body: dict | None):
    call = getattr(client, method.lower())
    return call(url, body, format="json") if body is not None else call(url)


# ---------------------------------------------------------------------------------------
# 1. Every cell
# ---------------------------------------------------------------------------------------


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
    response = _send(as_persona(persona), method, url, BODIES.get((method, route), {} if method != "GET" else None))
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
    elif route.startswith("review/") and method != "GET":
        from review.models import ReviewRecord, SamplingRule

        if route == "review/rules/":
            assert SamplingRule.objects.filter(name="matrix-new-rule").exists() is allowed
        elif method == "PATCH":
            assert (SamplingRule.objects.get(pk=world.sampling_rule_id).note == "changed by the matrix") is allowed
        elif method == "DELETE":
            assert SamplingRule.objects.filter(pk=world.sampling_rule_id).exists() is not allowed
        elif route.endswith("records/"):
            assert ReviewRecord.objects.filter(item_id=world.review_item_id).exists() is allowed
    elif (method, route) == ("POST", "policies/evaluate/") and allowed:
        body = response.json()
        assert {t["name"]: t["needs_approval"] for t in body["tools"]}["delete_account"] is True
    elif method == "GET" and allowed and (method, route) not in NOT_JSON:
        response.json()  # a JSON answer, not an HTML error page


def test_anonymous_gets_401_with_our_error_body_and_a_token_challenge(demo):
    response = APIClient().get(API + "runs/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Token'
    assert response.json() == {"error": {"code": "not_authenticated",
                                         "message": "Authentication credentials were not provided.", "details": {}}}
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    response = bad.get(API + "runs/")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


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


# ---------------------------------------------------------------------------------------
# 2. The URL conf and the matrix agree
# ---------------------------------------------------------------------------------------

IGNORED_METHODS = {"options", "head"}


def _walk(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def _as_route(pattern: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", pattern)


def _api_operations() -> dict[tuple[str, str], str]:
    """(METHOD, route) -> the view, for every route under api/v1/ and every method its view serves."""
    operations = {}
    for pattern, callback in _walk(get_resolver().url_patterns):
        if not pattern.startswith("api/v1/"):
            continue
        route = _as_route(pattern.removeprefix("api/v1/"))
        view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        assert view_class is not None, f"api/v1/{route} is served by a function view; the matrix cannot see its methods"
        methods = {m for m in view_class.http_method_names if hasattr(view_class, m)} - IGNORED_METHODS
        assert methods, f"api/v1/{route} ({view_class.__name__}) serves no method"
        for method in methods:
            operations[(method.upper(), route)] = f"{view_class.__module__}.{view_class.__qualname__}"
    return operations


def test_every_route_and_method_has_a_reviewed_row():
    missing = sorted(f"{method} /api/v1/{route} ({view})" for (method, route), view in _api_operations().items()
                     if (method, route) not in MATRIX)
    assert not missing, "API operations without a row in the role matrix (review who may call them):\n" + "\n".join(missing)


def test_every_row_names_an_existing_route():
    operations = _api_operations()
    stale = sorted(f"{method} {route}" for method, route in MATRIX if (method, route) not in operations)
    assert not stale, "rows of the role matrix for operations the URL conf no longer serves:\n" + "\n".join(stale)


def test_the_walk_sees_the_whole_api():
    # Guards the walker itself: if it stopped descending into includes, the two tests above
    # would pass vacuously.
    operations = _api_operations()
    assert len(operations) == len(MATRIX) >= 40
    assert ("POST", "approvals/{approval_id}/approve/") in operations
    assert ("GET", "agents/{slug}/versions/{version}/") in operations


def test_health_endpoints_answer_anyone(demo):
    # Outside /api/v1/ and outside the matrix: liveness and readiness, no credentials at all.
    for path in ("/healthz", "/readyz"):
        assert APIClient().get(path).status_code == 200


# ---------------------------------------------------------------------------------------
# 3. Mass assignment: fields a client must not set
# ---------------------------------------------------------------------------------------


def test_starting_a_run_refuses_status_caller_usage_and_receipt_fields(demo):
    """POST runs/ is strict: forged fields are a 400 that names each of them, and no run exists."""
    forged = {
        "id": "00000000-0000-0000-0000-000000000001", "status": "succeeded", "caller": "admin", "output": "forged",
        "tainted": True, "usage": {"input_tokens": 999}, "hash": "f" * 64, "seq": 999, "receipt_id": "x",
    }
    response = _client("operator").post(API + "runs/", {"agent": "crm-assistant", "input": "List all accounts.",
                                                        **forged}, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) == set(forged)
    assert not Run.objects.filter(input="List all accounts.", caller__username="operator").exists()


def test_an_approval_decision_refuses_forged_decision_fields(world):
    """approve/deny read only `reason`; who decided comes from the token, never from the body."""
    approval = world.pending_approval
    forged = {"status": "denied", "decided_by": "admin", "decided_at": "2000-01-01T00:00:00Z",
              "approver_role": "compliance", "arguments": {"account_id": "A-100"}, "arguments_sha256": "0" * 64}
    response = _client("approver").post(API + f"approvals/{approval.id}/approve/", {"reason": "ok", **forged},
                                        format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == set(forged)
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_by is None


def test_a_denial_cannot_be_turned_into_an_approval_by_the_body(world):
    approval = world.pending_approval
    response = _client("approver").post(API + f"approvals/{approval.id}/deny/",
                                        {"reason": "no", "status": "approved", "decided_by": "approver"}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"status", "decided_by"}
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert _client("approver").post(API + f"approvals/{approval.id}/deny/", {"reason": "no"}, format="json").status_code == 200
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
    response = _send(_client("admin"), method, world.url(method, route), {**body, **forged})
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
    response = _send(_client("compliance"), method, world.url("GET", route),
                     {"hash": "f" * 64, "prev_hash": "e" * 64, "seq": 999, "body": "{}"})
    assert response.status_code == 405, response.content
    receipt.refresh_from_db()
    assert (receipt.hash, receipt.prev_hash, receipt.seq, receipt.body) == before
    assert Receipt.objects.count() == 1


# ---------------------------------------------------------------------------------------
# Objects of another user are 404, never 403 (their existence is not disclosed)
# ---------------------------------------------------------------------------------------


@pytest.fixture
def second_operator_client(demo):
    user = get_user_model().objects.create_user("operator2", password="x")
    user.groups.add(Group.objects.get(name="operators"))
    return _client("operator2")


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "runs/{finished}/"),
    ("GET", "runs/{finished}/events/"),
    ("GET", "runs/{parked}/"),
    ("GET", "runs/{parked}/events/"),
    ("POST", "runs/{parked}/cancel/"),
    ("POST", "runs/{finished}/cancel/"),
    ("GET", "receipts/{receipt}/"),
    ("GET", "receipts/{receipt}/verify/"),
])
def test_another_operators_objects_are_404(world, second_operator_client, method, path):
    url = API + path.format(finished=world.finished_run_id, parked=world.parked_run_id, receipt=world.receipt_id)
    response = _send(second_operator_client, method, url, {} if method == "POST" else None)
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"
    # The same answer as for an id that does not exist at all: nothing tells them apart.
    missing = url.replace(str(world.finished_run_id), "00000000-0000-0000-0000-000000000000").replace(
        str(world.parked_run_id), "00000000-0000-0000-0000-000000000000").replace(
        str(world.receipt_id), "00000000-0000-0000-0000-000000000000")
    assert _send(second_operator_client, method, missing, {} if method == "POST" else None).json() == response.json()
    assert Run.objects.get(id=world.parked_run_id).status == "awaiting_approval"


def test_another_operators_runs_and_receipts_are_left_out_of_lists_and_exports(world, second_operator_client):
    world.finished_run, world.parked_run  # noqa: B018
    assert second_operator_client.get(API + "runs/").json()["count"] == 0
    assert second_operator_client.get(API + "receipts/").json()["count"] == 0
    export = second_operator_client.get(API + "receipts/export/?format=jsonl")
    assert export.status_code == 200 and export.content == b""
    assert _client("operator").get(API + "runs/").json()["count"] == 2


def test_idempotency_keys_belong_to_their_caller(world, second_operator_client):
    body = {"agent": "crm-assistant", "input": "List all accounts.", "idempotency_key": "shared-key"}
    first = _client("operator").post(API + "runs/", body, format="json")
    other = second_operator_client.post(API + "runs/", body, format="json")
    assert (first.status_code, other.status_code) == (201, 201)
    assert other.json()["id"] != first.json()["id"] and other.json()["caller"] == "operator2"


# ---------------------------------------------------------------------------------------
# Separation of duties and authentication edges the matrix relies on
# ---------------------------------------------------------------------------------------


def test_a_superuser_outside_the_approver_role_may_not_decide(world):
    response = _client("admin").post(API + f"approvals/{world.pending_approval_id}/approve/", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"] == {"code": "forbidden", "message": "only members of 'secops' may decide this request",
                                         "details": {}}


def test_no_one_approves_their_own_run_even_inside_the_approver_role(world):
    _user("operator").groups.add(Group.objects.get(name="secops"))
    for action in ("approve", "deny"):
        response = _client("operator").post(API + f"approvals/{world.pending_approval_id}/{action}/",
                                            {"reason": "mine"}, format="json")
        assert response.status_code == 403 and response.json()["error"]["message"] == "no one approves their own run"
    assert ApprovalRequest.objects.get(id=world.pending_approval_id).status == "pending"


def test_session_auth_writes_need_the_csrf_token(demo):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(_user("operator"))
    assert client.get(API + "runs/").status_code == 200
    response = client.post(API + "runs/", BODIES[("POST", "runs/")], format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]["message"]
    assert not Run.objects.exists()


def test_a_deactivated_users_token_is_refused(demo):
    client = _client("operator")
    get_user_model().objects.filter(username="operator").update(is_active=False)
    response = client.get(API + "runs/")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"
