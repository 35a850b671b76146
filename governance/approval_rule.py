"""When a tool call waits for a human: the rule, written once. Pure.

The harness applies it to each call of a run; the Policy Lab (governance.evaluation) to what a
run started now would do. They used to carry a copy each, and a copy drifts.

In order: an approval policy that matches names its role; else a tool marked requires_approval
names its own; else a side-effect call with a reason that holds whatever the policies say (the
run read untrusted text, the arguments carry a secret, an address or URL is not what it looks
like) waits for the taint approver role. With none of those the call goes ahead.
"""

from dataclasses import dataclass

from governance.engine import PolicyEvaluationError

TAINTED_RULE = "tainted-run rule"


@dataclass(frozen=True)
class Needed:
    approver_role: str
    ttl_seconds: int | None
    policy: dict | None  # the policy decision, explained, when a policy asked
    reasons: list[str]


def approval_needed(*, tool_name: str, tool: dict, found, must_approve: list[str],
                    taint_approver_role: str) -> Needed | None:
    """`tool`: its spec (side_effect, requires_approval, approver_role); `found`: the matching
    approval policy as (spec, decision), or None; `must_approve`: reasons that hold whatever the
    policies say; `taint_approver_role`: the configured role, empty when it does not exist.

    Raises PolicyEvaluationError when a call must wait and no role could approve it (fail closed).
    """
    if found is not None:
        spec, decision = found
        return Needed(spec.approver_role, spec.approval_ttl_seconds, decision.explain(),
                      [f"policy {spec.name} v{spec.version}"] + must_approve)
    if tool.get("requires_approval"):
        role = tool.get("approver_role")
        if not role:
            raise PolicyEvaluationError(f"tool {tool_name}", "it requires approval but names no approver role")
        return Needed(role, None, None, [f"tool {tool_name} requires approval"] + must_approve)
    if tool.get("side_effect") and must_approve:
        if not taint_approver_role:
            raise PolicyEvaluationError(TAINTED_RULE, "no approver role is configured for tainted runs")
        return Needed(taint_approver_role, None, None, list(must_approve))
    return None
