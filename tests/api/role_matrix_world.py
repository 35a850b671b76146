"""The real objects the role matrix's cells act on, and the clients that send them as a persona."""

import string
from datetime import timedelta
from functools import cached_property

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services as agent_services
from agents import sources
from agents.models import Agent, ModelProfile, Tool, ToolSource
from evals.models import EvalRun, GoldenCase
from governance import services as governance_services
from governance.models import Policy, ToolGrant
from governance.tokens import token_issue
from runs import services as run_services
from runs.models import ApprovalRequest, Receipt, Run, StandingApproval
from runs.standing import standing_grant
from skills.models import Skill
from skills.services import skill_import
from tests.api.role_matrix import API, QUERIES, SKILL_TEXT

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
    "review": {"rule_id": "sampling_rule_id", "item_id": "review_item_id", "proposal_id": "rule_proposal_id"},
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
    ("POST", "review/rule-proposals/{proposal_id}/withdraw/"): {"proposal_id": "own_rule_proposal_id"},
}

# ---------------------------------------------------------------------------------------
# Real objects, created on demand (each test runs in its own rolled-back transaction, so a
# write in one cell never touches the objects of another).
# ---------------------------------------------------------------------------------------


def user_named(username):
    return get_user_model().objects.get(username=username)


def operator_run(input_text: str) -> Run:
    """A run of the operator's, advanced as far as it goes without a person."""
    # In a non-transactional test on-commit enqueues never fire: the test plays the worker.
    run, _ = run_services.run_start(agent_slug="crm-assistant", input_text=input_text, caller=user_named("operator"))
    run_services.run_advance(run_id=run.id)
    run.refresh_from_db()
    return run


class World:
    """The objects the cells act on; each is created the first time a cell needs it."""

    @cached_property
    def finished_run(self) -> Run:
        run = operator_run("List all accounts.")
        assert run.status == "succeeded" and Receipt.objects.filter(run=run).exists()
        return run

    @cached_property
    def parked_run(self) -> Run:
        run = operator_run("Delete the account Initech.")
        assert run.status == "awaiting_approval"
        return run

    @cached_property
    def pending_approval(self) -> ApprovalRequest:
        approval = ApprovalRequest.objects.get(run=self.parked_run, status="pending")
        assert approval.approver_role.name == "secops"
        return approval

    @cached_property
    def standing_approval(self) -> StandingApproval:
        return standing_grant(user=user_named("approver"), tool="delete_account", agent=None, role="secops",
                              arguments={"account_id": {"equals": "A-400"}}, reason="matrix", via="session",
                              expires_at=timezone.now() + timedelta(days=1))

    @cached_property
    def policy(self) -> Policy:
        return governance_services.policy_create(values={
            "name": "matrix-policy", "type": "playbook", "keywords": ["matrixword"],
            "content": "1. Call `list_accounts`."}, user=user_named("admin"))

    @cached_property
    def role(self) -> Group:
        return Group.objects.create(name="matrix-role")

    @cached_property
    def grant(self) -> ToolGrant:
        return governance_services.grant_create(role=self.role, tool=Tool.objects.get(name="calculator"),
                                                user=user_named("admin"))

    @cached_property
    def skill(self) -> Skill:
        return skill_import(text=SKILL_TEXT.format(name="matrix-skill"), user=user_named("admin"))[0]

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

        return propose(self.golden_case, "delete", user=user_named("admin"))

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
    def rule_proposal(self):
        """Disabling the matrix's rule, proposed by a compliance member other than the personas."""
        from review.rules import rule_update

        other = get_user_model().objects.create_user("matrix-compliance")
        other.groups.add(Group.objects.get(name="compliance"))
        return rule_update(self.sampling_rule, {"enabled": False}, user=other)

    @cached_property
    def own_rule_proposal(self):
        from review.rules import rule_delete

        return rule_delete(self.sampling_rule, user=user_named("admin"))

    rule_proposal_id = property(lambda self: self.rule_proposal.pk)
    own_rule_proposal_id = property(lambda self: self.own_rule_proposal.pk)

    @cached_property
    def review_item(self):
        # Sampled as any run is (the rule samples every run), and assigned to compliance.
        from review.models import ReviewItem
        from review.records import review_assign

        self.sampling_rule  # noqa: B018 - the rule must exist before the run is sealed
        run = operator_run("List all accounts.")
        return review_assign(item=ReviewItem.objects.get(run=run), assignee=user_named("compliance"),
                             by=user_named("compliance"))

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

        return draft_propose(policy=self.policy, values={"description": "drafted by the matrix"},
                             user=user_named("admin"))

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

        return trust_propose(target=self.tool_source, user=user_named("admin"), reason="matrix")

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
        return token_issue(user=user_named("operator"), via="command", issued_by="test")[0]

    def url(self, method: str, route: str) -> str:
        names = [field for _, field, _, _ in string.Formatter().parse(route) if field]
        targets = TARGETS.get(route.split("/")[0], {}) | TARGET_OVERRIDES.get((method, route), {})
        url = API + route.format(**{name: getattr(self, targets[name]) for name in names})
        return url + QUERIES.get((method, route), "")


def token_client(username: str | None) -> APIClient:
    client = APIClient()
    if username is not None:
        _, key = token_issue(user=user_named(username), via="command", issued_by="test")
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def send(client: APIClient, method: str, url: str, body: dict | None):
    call = getattr(client, method.lower())
    return call(url, body, format="json") if body is not None else call(url)
