"""Writes of the policy domain. Every policy change writes a PolicyVersion in the same transaction."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from agents.models import Agent, Tool
from governance import engine
from core.api_errors import NotFound
from governance.models import Policy, PolicyVersion, ToolGrant
from core.approver_roles import unstaffed_problem
from governance.selectors import policy_spec, policy_values, routing_staff_problems

_SCALARS = (
    "type", "description", "enabled", "priority", "keywords", "match_mode", "regex",
    "target_tools", "content", "response", "approval_ttl_seconds", "quorum", "escalate_after_seconds",
)


def _apply(policy: Policy, values: dict) -> list[Agent] | None:
    for name in _SCALARS + ("name",):
        if name in values:
            setattr(policy, name, values[name])
    for field in ("approver_role", "escalate_to_role"):
        if field in values:
            role = values[field]
            if isinstance(role, str):
                role = Group.objects.filter(name=role).first()
                if role is None:
                    raise ValidationError({field: f"no role named {values[field]!r}"})
            setattr(policy, field, role)
    agents = None
    if "agents" in values:
        agents = [a if isinstance(a, Agent) else Agent.objects.filter(slug=a).first() for a in values["agents"]]
        missing = [slug for slug, a in zip(values["agents"], agents) if a is None]
        if missing:
            raise ValidationError({"agents": f"unknown agents: {', '.join(map(str, missing))}"})
    return agents


def _validate(policy: Policy, agents: list[Agent] | None) -> None:
    if not isinstance(policy.keywords, list) or not isinstance(policy.target_tools, list):
        raise ValidationError("keywords and target_tools must be lists")
    slugs = [a.slug for a in agents] if agents is not None else None
    problems = engine.validate(policy_spec(policy, agent_slugs=slugs),
                               default_ttl_seconds=settings.WARRANT["DEFAULT_APPROVAL_TTL_SECONDS"])
    if problems:
        raise ValidationError(problems)
    if policy.enabled and (unstaffed := unstaffed_problem(policy.approver_role)):
        # Disabling stays possible: only a policy that would park calls needs someone to decide them.
        raise ValidationError({"approver_role": [unstaffed]})
    if policy.enabled and (short := routing_staff_problems(policy)):
        raise ValidationError(short)


@transaction.atomic
def policy_create(*, values: dict, user=None) -> Policy:
    policy = Policy(name=values.get("name", ""))
    agents = _apply(policy, values)
    _validate(policy, agents)
    policy.full_clean(exclude=["agents"])
    policy.save()
    if agents is not None:
        policy.agents.set(agents)
    PolicyVersion.objects.create(
        policy=policy, policy_name=policy.name, version=policy.version,
        action=PolicyVersion.Action.CREATE, old_values=None, new_values=policy_values(policy), changed_by=user,
    )
    return policy


def _locked(policy: Policy) -> Policy:
    """The policy re-read under a row lock: a twin request may have deleted it meanwhile."""
    policy = Policy.objects.select_for_update().filter(pk=policy.pk).first()
    if policy is None:
        raise NotFound("no such policy")
    return policy


@transaction.atomic
def policy_update(*, policy: Policy, values: dict, user=None) -> Policy:
    policy = _locked(policy)
    before = policy_values(policy)
    agents = _apply(policy, values)
    _validate(policy, agents)
    policy.full_clean(exclude=["agents"])
    if agents is not None:
        policy.agents.set(agents)
    after = policy_values(policy)
    if after == before:
        return policy
    policy.version += 1
    policy.save()
    PolicyVersion.objects.create(
        policy=policy, policy_name=policy.name, version=policy.version,
        action=PolicyVersion.Action.UPDATE, old_values=before, new_values=after, changed_by=user,
    )
    return policy


@transaction.atomic
def policy_delete(*, policy: Policy, user=None) -> None:
    policy = _locked(policy)
    PolicyVersion.objects.create(
        policy=policy, policy_name=policy.name, version=policy.version + 1,
        action=PolicyVersion.Action.DELETE, old_values=policy_values(policy), new_values=None, changed_by=user,
    )
    policy.delete()


def grant_create(*, role: Group, tool: Tool, user=None) -> ToolGrant:
    grant, _ = ToolGrant.objects.get_or_create(role=role, tool=tool, defaults={"granted_by": user})
    return grant


def grant_delete(*, role: Group, tool: Tool) -> None:
    ToolGrant.objects.filter(role=role, tool=tool).delete()
