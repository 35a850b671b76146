"""The snapshot a golden case runs under: frozen as runs.freeze freezes a real run's, for the case's
roles instead of a user's.

A real run's snapshot is made by runs.freeze.governance_for from a user; a case has no user, only
roles. So the agent's part and the shared part (grants, skills, the taint approver role) come from
the same loaders, and the caller part is built for the roles, with a synthetic caller named
"eval:<case>". tests/evals checks that, for a real user's roles, the two snapshots are the same.

`policies`: the policy specs to put in place of the active ones (a draft's, later: the gating of
issue 23 item 3 passes them here); None: the policies a run would freeze now.
"""

from django.conf import settings

from agents.models import ModelProfile
from governance.engine import PolicySpec, snapshot_sha256
from runs import freeze


class NoSnapshot(Exception):
    """The agent is unknown or has no published version."""


def eval_snapshot(*, agent_slug: str, roles: list[str], username: str, policies: list[PolicySpec] | None = None,
                  profile: str = "") -> dict:
    part = freeze._load_agent(agent_slug)
    if part is None or part.version is None:
        raise NoSnapshot(f"agent {agent_slug!r} is unknown or has no published version")
    shared = freeze._load_shared()
    granted = set().union(*(shared.grants.get(role, ()) for role in roles))
    agent_spec = part.agent_spec
    if profile:
        agent_spec = agent_spec | {"model_profile": ModelProfile.objects.get(name=profile).spec()}
    if policies is None:
        policy_dicts, policy_sha = part.policies, part.policy_snapshot_sha256
    else:
        policy_dicts, policy_sha = [p.to_dict() for p in policies], snapshot_sha256(policies)
    return {
        "agent": agent_spec,
        "caller": {"username": username, "roles": sorted(roles)},
        "tools": part.tools,
        "granted_tools": sorted(granted & set(part.tools)),
        "policies": policy_dicts,
        "policy_snapshot_sha256": policy_sha,
        "skills": shared.skills,
        "taint_approver_role": shared.taint_approver_role,
        "limits": {
            "max_approval_requests": settings.WARRANT["MAX_APPROVAL_REQUESTS_PER_RUN"],
            "tool_result_context_chars": settings.WARRANT["TOOL_RESULT_CONTEXT_CHARS"],
        },
    }
