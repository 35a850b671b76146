"""The snapshot a golden case runs under: frozen as runs.freeze freezes a real run's, for the case's
roles instead of a user's.

A real run's snapshot is made by runs.freeze.governance_for from a user; a case has no user, only
roles, so it is made by runs.freeze.governance_for_roles (the same parts, kept under the same
stamp) for a synthetic caller named "eval:<case>". tests/evals checks that, for a real user's
roles, the two snapshots are the same.

`policies`: the policy specs to put in place of the active ones (the gate passes them with a draft
in place, evals.gating); None: the policies a run would freeze now. `skills`: likewise, the active
skills' specs (a skill about to be activated among them).
"""

from agents.models import ModelProfile
from governance.engine import PolicySpec, snapshot_sha256
from runs import freeze


class NoSnapshot(Exception):
    """The agent is unknown or has no published version."""


def eval_snapshot(*, agent_slug: str, roles: list[str], username: str, policies: list[PolicySpec] | None = None,
                  profile: str = "", skills: list[dict] | None = None) -> dict:
    part, snapshot = freeze.governance_for_roles(agent_slug=agent_slug, username=username, roles=sorted(roles))
    if snapshot is None:
        raise NoSnapshot(f"agent {agent_slug!r} is unknown or has no published version")
    if profile:
        snapshot["agent"] = snapshot["agent"] | {"model_profile": ModelProfile.objects.get(name=profile).spec()}
    if policies is not None:
        snapshot |= {"policies": [p.to_dict() for p in policies], "policy_snapshot_sha256": snapshot_sha256(policies)}
    if skills is not None:
        snapshot |= {"skills": skills}
    return snapshot
