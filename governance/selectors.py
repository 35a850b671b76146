"""Reads of the policy domain, shaped for the pure engine."""


from core import stamp as governance_stamp
from core.approver_roles import role_members, unstaffed_problem
from governance.engine import PolicySpec
from governance.models import Policy, ToolGrant

POLICY_FIELDS = (
    "name", "type", "description", "enabled", "priority", "keywords", "match_mode", "regex",
    "target_tools", "content", "response", "approval_ttl_seconds", "quorum", "escalate_after_seconds",
)


def policy_values(policy: Policy) -> dict:
    """Every editable value of a policy, JSON-ready: what history rows record."""
    values = {name: getattr(policy, name) for name in POLICY_FIELDS}
    values["approver_role"] = policy.approver_role.name if policy.approver_role_id else None
    values["escalate_to_role"] = policy.escalate_to_role.name if policy.escalate_to_role_id else None
    values["agents"] = sorted(policy.agents.values_list("slug", flat=True)) if policy.pk else []
    return values


def policy_spec(policy: Policy, *, agent_slugs: list[str] | None = None) -> PolicySpec:
    """The engine's view of a policy; `agent_slugs` stands in for a scoping not saved yet."""
    if agent_slugs is None:
        agent_slugs = [a.slug for a in policy.agents.all()] if policy.pk else []
    return PolicySpec(
        id=policy.pk,
        name=policy.name,
        type=policy.type,
        version=policy.version,
        priority=policy.priority,
        enabled=policy.enabled,
        agents=tuple(sorted(agent_slugs)),
        keywords=tuple(policy.keywords or ()),
        match_mode=policy.match_mode,
        regex=policy.regex,
        target_tools=tuple(policy.target_tools or ()),
        content=policy.content,
        response=policy.response,
        approver_role=policy.approver_role.name if policy.approver_role_id else None,
        approval_ttl_seconds=policy.approval_ttl_seconds,
        quorum=policy.quorum,
        escalate_to_role=policy.escalate_to_role.name if policy.escalate_to_role_id else None,
        escalate_after_seconds=policy.escalate_after_seconds,
        emergency=policy.emergency_reason,
    )


def policy_specs(*, agent_slug: str | None = None) -> list[PolicySpec]:
    """Enabled policies that apply to `agent_slug` (all agents' when None), in priority order."""
    queryset = Policy.objects.filter(enabled=True).select_related("approver_role", "escalate_to_role").prefetch_related("agents")
    specs = [policy_spec(p) for p in queryset]
    if agent_slug is not None:
        specs = [s for s in specs if not s.agents or agent_slug in s.agents]
    return specs


_granted_kept = governance_stamp.Kept(limit=1_000)


def granted_tool_names(*, role_names: list[str], stamp: str | None = None) -> set[str]:
    """Enabled tools granted to any of `role_names`, as the database holds them now.

    Asked before every tool call, so the answer is kept while the governance stamp holds: grants,
    roles and tools are stamped tables, and any write to them (committed, or this transaction's
    own) changes the stamp this reads first. `stamp`: the stamp the caller read for this call
    already (the dispatcher's live check of the same call can then use it too)."""
    granted = _granted_kept.get_or_load(tuple(sorted(role_names)), lambda: frozenset(
        ToolGrant.objects.filter(role__name__in=role_names, tool__enabled=True).values_list("tool__name", flat=True)),
        stamp=stamp)
    return set(granted)


def user_role_names(user) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def routing_staff_problems(policy: Policy) -> dict[str, list[str]]:
    """Where a tool approval's quorum could never be met: its approver role, or the role it
    escalates to (which must find the whole quorum again), has fewer active members than it asks
    for. Keyed by the field to point at; empty when both are staffed enough."""
    if policy.type != "tool_approval":
        return {}
    problems: dict[str, list[str]] = {}
    if policy.escalate_to_role_id and (unstaffed := unstaffed_problem(policy.escalate_to_role)):
        problems["escalate_to_role"] = [unstaffed]
    for field in ("approver_role", "escalate_to_role"):
        role = getattr(policy, field)
        if field not in problems and role is not None and policy.quorum > 1 and role_members(role) < policy.quorum:
            problems.setdefault(field, []).append(
                f"the role {role.name!r} has {role_members(role)} active members, fewer than the quorum of "
                f"{policy.quorum}: a request could never be approved. Add members or lower the quorum.")
    return problems
