"""The policy dry run: what the engine would decide for an input, as a run started now would see it.

A read: nothing is written and no run starts. The API's evaluate endpoint and the admin's
policy lab both answer from here.
"""

from django.conf import settings
from django.contrib.auth.models import Group

from agents.models import Agent, Tool
from governance import engine
from governance.gate import NeedsApproval, Refused, RunFacts, gate
from governance.screening import screen, screen_known
from governance.selectors import granted_tool_names, policy_specs
from governance.taint import opening_taint, reason
from skills.matcher import match_skills
from skills.models import Skill

MAX_EVALUATE_INPUT_CHARS = 20_000  # the same limit as a run's input
NO_POLICY = {"policy_id": None, "policy": None, "version": None, "type": None, "matched": []}


def policy_evaluate(*, agent: Agent | None, role: str | None, text: str) -> dict:
    """What the pure engine decides for `text`, as a run started now would see it; starts nothing.

    Without an agent only the policies scoped to every agent apply and every enabled tool is a
    candidate; without a role no grant filter is applied. Each tool's approval is the harness's
    own gate (governance.gate) over what a run would hold after its start: the same taint, the
    same active skill. Raises PolicyEvaluationError when a policy that applies cannot be
    evaluated (a run would fail closed on it).
    """
    slug = agent.slug if agent else ""
    specs = policy_specs(agent_slug=agent.slug if agent else None)
    if agent is None:
        specs = [s for s in specs if not s.agents]
    engine.check_all(specs, agent=slug)

    guard = engine.intent_guard(specs, agent=slug, text=text)
    playbooks = engine.input_decisions(specs, agent=slug, text=text, type_="playbook")
    formatters = engine.input_decisions(specs, agent=slug, text=text, type_="output_formatter")

    version = agent.current_version if agent else None
    snapshot = _snapshot(slug, version.spec["tools"] if version else None, role)
    facts = _facts(snapshot, specs, text)
    tools = []
    for name in sorted(snapshot["granted_tools"]):
        tool = snapshot["tools"][name]
        guides = [
            decision.explain() | {"content": spec.content}
            for spec, decision in engine.tool_guides(specs, agent=slug, tool=name)
        ]
        verdict = gate({"name": name, "arguments": None}, snapshot, facts)
        approval = None
        if isinstance(verdict, NeedsApproval):
            approval = (verdict.policy or NO_POLICY) | {"approver_role": verdict.approver_role,
                                                        "reason": "; ".join(verdict.reasons), "quorum": verdict.quorum,
                                                        "escalate_to_role": verdict.escalate_to_role,
                                                        "escalate_after_seconds": verdict.escalate_after_seconds}
        tools.append({"name": name, "side_effect": tool["side_effect"], "guides": guides,
                      "needs_approval": approval is not None, "approval": approval,
                      "refused": {"code": verdict.code, "reason": verdict.reason} if isinstance(verdict, Refused) else None,
                      # Reading its result taints the run, so any side-effect call after it waits for a human.
                      "result_taints_run": not tool["trusted"]})

    return {
        "agent": {"slug": agent.slug, "version": version.version} if agent else None,
        "role": role,
        "policy_snapshot_sha256": engine.snapshot_sha256(specs),
        "blocked": guard is not None,
        "intent_guard": guard[1].explain() | {"response": guard[0].response} if guard else None,
        "tainted": screen(text),
        "playbooks": [decision.explain() | {"content": spec.content} for spec, decision in playbooks],
        "output_formatter": formatters[0][1].explain() | {"content": formatters[0][0].content} if formatters else None,
        "tools": tools,
    }


def _snapshot(slug: str, agent_tools: list[str] | None, role: str | None) -> dict:
    """The governance a run started now would freeze (runs.freeze), in its shape: the agent's
    tools (every enabled one without an agent), those granted to `role` (all, without one)."""
    names = agent_tools if agent_tools is not None else list(Tool.objects.values_list("name", flat=True))
    rows = Tool.objects.select_related("approver_role", "tool_source").filter(name__in=names, enabled=True, held=False)
    tools = {t.name: t.spec() for t in rows}
    granted = granted_tool_names(role_names=[role]) if role is not None else set(tools)
    taint_role = settings.WARRANT.get("TAINT_APPROVER_ROLE", "")
    return {
        "agent": {"slug": slug, "tools": names},
        "tools": tools,
        "granted_tools": sorted(granted & set(tools)),
        "skills": [s.spec() for s in Skill.objects.filter(status=Skill.Status.ACTIVE)],
        "taint_approver_role": taint_role if Group.objects.filter(name=taint_role).exists() else "",
        "limits": {"max_approval_requests": settings.WARRANT["MAX_APPROVAL_REQUESTS_PER_RUN"]},
    }


def _facts(snapshot: dict, specs: list, text: str) -> RunFacts:
    """The run as its first model call would find it: tainted by its start, its skill active."""
    reasons = [reason(origin, patterns) for origin, patterns in opening_taint(snapshot, text)]
    matched = match_skills(snapshot["skills"], text)
    active = [matched[0]["name"]] if matched else []
    if matched and (patterns := screen_known(matched[0].get("body", ""))):
        reasons.append(reason(f"skill {active[0]}", patterns))
    return RunFacts(input_text=text, policies=specs, tainted=bool(reasons), taint_reasons=reasons,
                    active_skills=active)


def hidden_tools(*, agent: Agent | None, role: str | None, shown: list[str]) -> list[dict]:
    """The agent's tools the model would not be shown, each with the reason."""
    if agent is None or agent.current_version is None:
        return []
    granted = granted_tool_names(role_names=[role]) if role is not None else None
    enabled = set(Tool.objects.filter(enabled=True).values_list("name", flat=True))
    held = set(Tool.objects.filter(held=True).values_list("name", flat=True))
    rows = []
    for name in sorted(set(agent.current_version.spec["tools"]) - set(shown)):
        if name in held:
            reason = "held: its source changed it, and a governance admin has not re-approved it"
        elif name not in enabled:
            reason = "disabled in the tool registry"
        elif granted is not None and name not in granted:
            reason = f"not granted to the role {role}"
        else:
            reason = "not available"
        rows.append({"name": name, "reason": reason})
    return rows


def unsound_policies() -> list[dict]:
    """Enabled policies the engine cannot evaluate, each with why: a regex saved before policies
    ran on RE2 that RE2 cannot run, or a row edited past the services. Every run such a policy
    applies to fails closed until a governance admin fixes or disables it."""
    return [{"policy": spec.name, "id": spec.id, "version": spec.version, "problems": problems}
            for spec in policy_specs() if (problems := engine.validate(spec))]
