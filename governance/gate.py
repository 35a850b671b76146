"""What happens to one tool call before it runs: refused, waits for a human, or goes ahead. Pure.

The harness asks for every call of a run; the Policy Lab (governance.evaluation) for every tool a
run started now would be shown. One function, so the two cannot differ.

Refused, in this order: a tool the agent does not have; one the caller's roles may not use (as
frozen when the run started, and as granted now: a revoked grant bites at once); one outside
the active skills' allowed tools, or one with a side effect they do not declare; arguments that
break the tool's schema.

Waits for a human, in this order: an approval policy that matches names its role; else a tool
marked requires_approval names its own; else a side-effect call with a reason that holds whatever
the policies say (the run read untrusted text, the arguments carry a secret, an address or URL
is not what it looks like) waits for the taint approver role. A call that must wait when the
run has raised as many approval requests as it may is refused instead.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jsonschema

from agents.tools import arguments as tool_arguments
from governance import engine
from governance.engine import PolicyEvaluationError

TAINTED_RULE = "tainted-run rule"
# Approval requests one run may raise (pending or decided) before further calls needing one are
# refused: a run, or a model talking to itself, cannot flood the approvers.
DEFAULT_MAX_APPROVAL_REQUESTS = 5


@dataclass(frozen=True)
class Refused:
    code: str  # unknown_tool, not_permitted, invalid_arguments, approval_limit
    reason: str
    path: list | None = None  # for invalid_arguments: where in the arguments


@dataclass(frozen=True)
class NeedsApproval:
    approver_role: str
    ttl_seconds: int | None
    policy: dict | None  # the policy decision, explained, when a policy asked
    reasons: list[str]
    # From the policy that asked (a tool's own requires_approval, or the tainted-run rule, asks
    # one person with no escalation).
    quorum: int = 1
    escalate_to_role: str | None = None
    escalate_after_seconds: int | None = None


@dataclass(frozen=True)
class Allowed:
    pass


Decision = Refused | NeedsApproval | Allowed
ALLOWED = Allowed()


def _none_found(arguments: dict) -> list[str]:
    return []


@dataclass(frozen=True)
class RunFacts:
    """What the gate reads of the run, as plain data (governance knows nothing of runs)."""

    input_text: str
    policies: Sequence[engine.PolicySpec]  # the run's policies, compiled
    tainted: bool = False
    taint_reasons: Sequence[str] = ()
    active_skills: Sequence[str] = ()
    granted_now: Callable[[], set[str]] | None = None  # the caller's grants as they are now
    approval_requests: int = 0  # requests the run has raised so far
    asked: bool = False  # this call is one of them
    leaks: Callable[[dict], list[str]] = _none_found  # kinds of secret in the arguments
    spoofed: Callable[[dict], list[str]] = _none_found  # addresses and URLs not what they look like


def gate(call: dict, snapshot: dict, run: RunFacts) -> Decision:
    """`call`: name and arguments (None: not known, as in the Policy Lab; argument checks are
    skipped). `snapshot`: the run's frozen governance (agent, tools, granted_tools, skills,
    taint_approver_role, limits). Raises PolicyEvaluationError when a call must wait and no
    role could approve it (fail closed)."""
    refused = _refused(call, snapshot, run)
    if refused is not None:
        return refused
    needed = _approval(call, snapshot, run)
    if needed is None:
        return ALLOWED
    limit = snapshot.get("limits", {}).get("max_approval_requests", DEFAULT_MAX_APPROVAL_REQUESTS)
    if not run.asked and run.approval_requests >= limit:
        return Refused("approval_limit", f"this run already raised {run.approval_requests} approval requests, "
                                         f"the most it may; {call['name']} did not run")
    return needed


def _refused(call: dict, snapshot: dict, run: RunFacts) -> Refused | None:
    name, tools = call["name"], snapshot["tools"]
    if name not in snapshot["agent"]["tools"] or name not in tools:
        return Refused("unknown_tool", f"there is no tool named {name!r} for this agent")
    if name not in snapshot["granted_tools"] or (run.granted_now is not None and name not in run.granted_now()):
        return Refused("not_permitted", f"the caller's roles may not use {name!r}")
    allowed = skill_allowed(snapshot, run.active_skills)
    if allowed is not None and name not in allowed:
        return Refused("not_permitted", f"{name!r} is outside the active skill's allowed tools")
    if allowed is not None and tools[name]["side_effect"] and name not in _skill_side_effects(snapshot, run.active_skills):
        return Refused("not_permitted", f"{name!r} changes things, and the active skill does not declare it "
                                        "among its side effects")
    if call["arguments"] is None:
        return None
    try:
        tool_arguments.validate(call["arguments"], tools[name]["input_schema"])
    except jsonschema.ValidationError as exc:
        return Refused("invalid_arguments", exc.message, path=list(exc.absolute_path))
    except jsonschema.SchemaError as exc:
        return Refused("invalid_arguments", f"the tool's schema is broken: {exc.message}")
    return None


def _approval(call: dict, snapshot: dict, run: RunFacts) -> NeedsApproval | None:
    name, tool = call["name"], snapshot["tools"][call["name"]]
    must = ["the run is tainted: " + "; ".join(run.taint_reasons)] if run.tainted else []
    if tool["side_effect"] and call["arguments"] is not None:
        # A secret on its way out, or an address that is not what it looks like, is never the
        # model's call to make, whatever the policies say.
        if leaked := run.leaks(call["arguments"]):
            must.append("the arguments carry a secret: " + ", ".join(leaked))
        if spoofed := run.spoofed(call["arguments"]):
            must.append("an address or URL is not what it looks like: " + "; ".join(spoofed))
    found = engine.tool_approval(run.policies, agent=snapshot["agent"]["slug"], tool=name, text=run.input_text)
    if found is not None:
        spec, decision = found
        return NeedsApproval(spec.approver_role, spec.approval_ttl_seconds, decision.explain(),
                             [f"policy {spec.name} v{spec.version}"] + must, quorum=spec.quorum,
                             escalate_to_role=spec.escalate_to_role, escalate_after_seconds=spec.escalate_after_seconds)
    if tool.get("requires_approval"):
        if not tool.get("approver_role"):
            raise PolicyEvaluationError(f"tool {name}", "it requires approval but names no approver role")
        return NeedsApproval(tool["approver_role"], None, None, [f"tool {name} requires approval"] + must)
    if tool["side_effect"] and must:
        if not snapshot.get("taint_approver_role"):
            raise PolicyEvaluationError(TAINTED_RULE, "no approver role is configured for tainted runs")
        return NeedsApproval(snapshot["taint_approver_role"], None, None, must)
    return None


def skill_allowed(snapshot: dict, active_skills: Sequence[str]) -> set[str] | None:
    """The tools the active skills with a contract allow, or None when none has one."""
    by_name = {s["name"]: s for s in snapshot.get("skills", [])}
    contracts = [by_name[n]["allowed_tools"] for n in active_skills if by_name[n]["allowed_tools"]]
    return set().union(*contracts) if contracts else None


def _skill_side_effects(snapshot: dict, active_skills: Sequence[str]) -> set[str]:
    """What the active skills with a contract may change: their declared side effects (none,
    unless named). A skill without a contract constrains nothing."""
    by_name = {s["name"]: s for s in snapshot.get("skills", [])}
    return {tool for n in active_skills if by_name[n]["allowed_tools"] for tool in by_name[n].get("side_effects", [])}
