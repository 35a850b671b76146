"""A run's governance, frozen when the run is asked for: its agent's published version, the tools,
policies, grants and skills that hold at that moment, and the caller's roles.

Reading all that takes nine statements, and it changes rarely. So each process keeps what it
froze under the governance stamp (core.stamp), which changes in the same transaction as
every write to the tables read here: a run asked for after a change has committed reads the new
stamp and freezes afresh. What is kept under a stamp was read while that stamp held: it is
stored only if the stamp read after the loads is the one read before them.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import Group

from agents.models import Agent, AgentVersion, Tool
from core import stamp as governance_stamp
from governance.engine import snapshot_sha256
from governance.models import ToolGrant
from core.access import access_of
from governance.selectors import policy_specs
from skills.models import Skill


@dataclass(frozen=True)
class AgentGovernance:
    """One agent's part: shared by every caller, read-only once built."""

    agent: Agent
    version: AgentVersion | None
    agent_spec: dict | None = None
    tools: dict = field(default_factory=dict)
    policies: list = field(default_factory=list)
    policy_snapshot_sha256: str = ""


@dataclass(frozen=True)
class _Shared:
    grants: dict  # role name -> names of the enabled tools granted to it
    skills: list
    taint_approver_role: str


_kept = governance_stamp.Kept(limit=1_000)
_SHARED = ("shared",)


def _load_agent(agent_slug: str) -> AgentGovernance | None:
    agent = Agent.objects.filter(slug=agent_slug).first()
    if agent is None:
        return None
    version = agent.current_version
    if version is None:
        return AgentGovernance(agent=agent, version=None)
    spec = version.spec
    tools = {t.name: t.spec() | {"handler": t.handler, "timeout_seconds": t.timeout_seconds}
             for t in Tool.objects.select_related("approver_role", "tool_source").filter(
                 name__in=spec["tools"], enabled=True, held=False)}
    policies = policy_specs(agent_slug=agent.slug)
    return AgentGovernance(
        agent=agent, version=version,
        agent_spec=spec | {"slug": agent.slug, "version": version.version, "sha256": version.sha256},
        tools=tools, policies=[p.to_dict() for p in policies], policy_snapshot_sha256=snapshot_sha256(policies),
    )


def _load_shared() -> _Shared:
    grants: dict[str, set] = {}
    for role, tool in ToolGrant.objects.filter(tool__enabled=True).values_list("role__name", "tool__name"):
        grants.setdefault(role, set()).add(tool)
    taint_role = settings.WARRANT.get("TAINT_APPROVER_ROLE", "")
    return _Shared(
        grants={role: frozenset(tools) for role, tools in grants.items()},
        skills=[s.spec() for s in Skill.objects.filter(status=Skill.Status.ACTIVE)],
        taint_approver_role=taint_role if Group.objects.filter(name=taint_role).exists() else "",
    )


def governance_for(*, agent_slug: str, caller, stamp: str | None = None) -> tuple[AgentGovernance | None, dict | None]:
    """(the agent's part, the run's snapshot); the snapshot is None without an agent or a version.

    `stamp`: the governance stamp read when the run was asked for, if the caller read it already.
    """
    stamp = stamp or governance_stamp.current()
    return governance_for_roles(agent_slug=agent_slug, username=caller.get_username(),
                                roles=access_of(caller, stamp=stamp).roles, stamp=stamp)


def governance_for_roles(*, agent_slug: str, username: str, roles, stamp: str | None = None,
                         ) -> tuple[AgentGovernance | None, dict | None]:
    """governance_for for a caller named `username` holding `roles` (an eval's synthetic caller has
    no user row); kept under the same stamp."""
    stamp = stamp or governance_stamp.current()
    part, shared = _kept.get(stamp, ("agent", agent_slug)), _kept.get(stamp, _SHARED)
    if part is None or shared is None:
        part, shared = part or _load_agent(agent_slug), shared or _load_shared()
        _kept.keep(stamp, {_SHARED: shared} | ({("agent", agent_slug): part} if part else {}))
    if part is None or part.version is None:
        return part, None
    granted = set().union(*(shared.grants.get(role, ()) for role in roles))
    return part, {
        "agent": part.agent_spec,
        "caller": {"username": username, "roles": list(roles)},
        "tools": part.tools,
        "granted_tools": sorted(granted & set(part.tools)),
        "policies": part.policies,
        "policy_snapshot_sha256": part.policy_snapshot_sha256,
        "skills": shared.skills,
        "taint_approver_role": shared.taint_approver_role,
        "limits": {
            "max_approval_requests": settings.WARRANT["MAX_APPROVAL_REQUESTS_PER_RUN"],
            "tool_result_context_chars": settings.WARRANT["TOOL_RESULT_CONTEXT_CHARS"],
        },
    }


def clear() -> None:
    _kept.clear()
