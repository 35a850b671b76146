"""The policy dry run: what the engine would decide for an input, as a run started now would see it.

A read: nothing is written and no run starts. The API's evaluate endpoint and the admin's
policy lab both answer from here.
"""

from django.conf import settings
from django.contrib.auth.models import Group

from agents.models import Agent, Tool
from governance import engine
from governance.approval_rule import approval_needed
from governance.screening import screen
from governance.selectors import granted_tool_names, policy_specs

MAX_EVALUATE_INPUT_CHARS = 20_000  # the same limit as a run's input


def policy_evaluate(*, agent: Agent | None, role: str | None, text: str) -> dict:
    """What the pure engine decides for `text`, as a run started now would see it; starts nothing.

    Without an agent only the policies scoped to every agent apply and every enabled tool is a
    candidate; without a role no grant filter is applied. Raises PolicyEvaluationError when a
    policy that applies cannot be evaluated (a run would fail closed on it).
    """
    slug = agent.slug if agent else ""
    specs = policy_specs(agent_slug=agent.slug if agent else None)
    if agent is None:
        specs = [s for s in specs if not s.agents]
    engine.check_all(specs, agent=slug)

    guard = engine.intent_guard(specs, agent=slug, text=text)
    playbooks = engine.input_decisions(specs, agent=slug, text=text, type_="playbook")
    formatters = engine.input_decisions(specs, agent=slug, text=text, type_="output_formatter")
    tainted = screen(text)

    version = agent.current_version if agent else None
    names = version.spec["tools"] if version else list(Tool.objects.values_list("name", flat=True))
    if role is not None:
        granted = granted_tool_names(role_names=[role])
        names = [n for n in names if n in granted]
    taint_role = settings.WARRANT.get("TAINT_APPROVER_ROLE", "")
    taint_role = taint_role if Group.objects.filter(name=taint_role).exists() else ""
    rows = list(Tool.objects.select_related("approver_role", "tool_source")
                .filter(name__in=names, enabled=True, held=False).order_by("name"))
    must = ["the input is tainted: " + ", ".join(tainted)] if tainted else []
    # As in the harness: an untrusted source's descriptions, shown to the model, taint from the start.
    must += [f"description of tool {t.name}: untrusted source" for t in rows
             if t.source in (Tool.Source.MCP, Tool.Source.OPENAPI) and not t.output_trusted]
    tools = []
    for tool in rows:
        guides = [
            decision.explain() | {"content": spec.content}
            for spec, decision in engine.tool_guides(specs, agent=slug, tool=tool.name)
        ]
        # The harness's own rule (governance.approval_rule), so the dry run says what a run would do.
        needed = approval_needed(tool_name=tool.name, tool=tool.spec(), must_approve=must, taint_approver_role=taint_role,
                                 found=engine.tool_approval(specs, agent=slug, tool=tool.name, text=text))
        approval = None
        if needed is not None:
            approval = (needed.policy or {"policy_id": None, "policy": None, "version": None, "type": None, "matched": []}) | {
                "approver_role": needed.approver_role, "reason": "; ".join(needed.reasons)}
        tools.append({"name": tool.name, "side_effect": tool.side_effect, "guides": guides,
                      "needs_approval": approval is not None, "approval": approval,
                      # Reading its result taints the run, so any side-effect call after it waits for a human.
                      "result_taints_run": not tool.output_trusted})

    return {
        "agent": {"slug": agent.slug, "version": version.version} if agent else None,
        "role": role,
        "policy_snapshot_sha256": engine.snapshot_sha256(specs),
        "blocked": guard is not None,
        "intent_guard": guard[1].explain() | {"response": guard[0].response} if guard else None,
        "tainted": tainted,
        "playbooks": [decision.explain() | {"content": spec.content} for spec, decision in playbooks],
        "output_formatter": formatters[0][1].explain() | {"content": formatters[0][0].content} if formatters else None,
        "tools": tools,
    }


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
