"""The gate: the golden sets a change must pass before it is in force, run before and after it.

A policy draft (governance.drafts), or a skill about to be activated or taken out of force
(skills.services), is put in place of what is in force, in the snapshot only (evals.snapshot), and
every enabled case of every agent it governs is run twice: as things are, and with the change. The
eval run records the "after" results, with a report of each case side by side (status, tools called,
policies fired, the parked tool, an excerpt of the output, pass or fail) and which of them changed. The change
passes when the "after" pass rate reaches GATE_THRESHOLD. An agent without enabled cases has
nothing to check: the report says so (`agents_without_cases`), and it does not stop the change.

Registered with governance and skills when the app loads (evals.apps), since they sit below it.
"""

import json

from agents.models import Agent
from governance.drafts import GateVerdict
from governance.engine import PolicySpec
from governance.selectors import policy_specs
from runs import freeze
from evals.expectations import _excerpt
from evals.models import EvalRun, GoldenCase, Purpose
from evals.runner import evaluate, result_of, store

# The share of an agent's cases that must pass with the change in place: all of them. A gate that
# let one case break would let a change break one production request on purpose.
GATE_THRESHOLD = 1.0


def _side(actual: dict, passed: bool, failures: list[dict]) -> dict:
    return {"passed": passed, "status": actual.get("status", ""), "awaiting_tool": actual.get("awaiting_tool", ""),
            "tools_called": list(actual.get("tools_called", [])),
            "policies_fired": list(actual.get("policies_fired", [])),
            "output": _excerpt(actual.get("output", ""), width=240), "failures": failures,
            # Read-only calls no recording answered (they went to the live data): a verdict resting on them
            # can change with the data, so the report shows them beside the rest.
            "unrecorded": [f"{c['tool']} {json.dumps(c['arguments'], sort_keys=True)}" for c in actual.get("unrecorded", [])]}


def run_gate(*, cases: list[GoldenCase], after: dict, subject: str, purpose: str, user=None) -> GateVerdict:
    """Run `cases` as in force and with the change (`after(case)`: evaluate's keyword arguments for it)."""
    eval_run = EvalRun.objects.create(threshold=GATE_THRESHOLD, purpose=purpose, subject=subject[:200],
                                      started_by=user if user is not None and user.is_authenticated else None)
    results, rows = [], []
    for case in cases:
        before = result_of(eval_run, case, *evaluate(case))
        now = result_of(eval_run, case, *evaluate(case, **after(case)))
        results.append(now)
        left = _side(before.actual | {"output": before.output}, before.passed, before.failures)
        right = _side(now.actual | {"output": now.output}, now.passed, now.failures)
        rows.append({"case": case.pk, "agent": case.agent.slug, "name": case.name,
                     "changed": left != right,
                     "before": left, "after": right})
    eval_run = store(eval_run, results)
    agents = sorted({case.agent.slug for case in cases})
    report = {"subject": subject, "eval_run": str(eval_run.id), "threshold": GATE_THRESHOLD, "total": eval_run.total,
              "passed": eval_run.passed, "pass_rate": eval_run.pass_rate if cases else None, "agents": agents,
              "changed": [row["name"] for row in rows if row["changed"]],
              "broken": [row["name"] for row in rows if row["before"]["passed"] and not row["after"]["passed"]],
              "unrecorded": [row["name"] for row in rows if row["after"]["unrecorded"]],
              "cases": rows}
    # No case to run is no evidence against the change: the report names the agents left unchecked.
    passed = not cases or eval_run.pass_rate >= GATE_THRESHOLD
    EvalRun.objects.filter(pk=eval_run.pk).update(report=report,
                                                  status=EvalRun.Status.PASSED if passed else EvalRun.Status.FAILED)
    return GateVerdict(passed=passed, eval_run_id=str(eval_run.id), report=report)


def _governed(*scopes: tuple[str, ...] | None) -> list[str] | None:
    """The agents a policy scoped so governs (None: every agent: a policy scoped to none applies to all)."""
    slugs: set[str] = set()
    for scope in scopes:
        if scope is None:
            continue
        if not scope:
            return None
        slugs |= set(scope)
    return sorted(slugs)


def _cases(agents: list[str] | None) -> list[GoldenCase]:
    cases = GoldenCase.objects.filter(enabled=True).select_related("agent").order_by("agent__slug", "name")
    return list(cases if agents is None else cases.filter(agent__slug__in=agents))


def _with_draft(agent_slug: str, *, replaces: int | None, proposed: PolicySpec | None) -> list[PolicySpec]:
    """The policies `agent_slug`'s runs would freeze with the draft in force."""
    specs = [s for s in policy_specs(agent_slug=agent_slug) if replaces is None or s.id != replaces]
    if proposed is not None and proposed.enabled and (not proposed.agents or agent_slug in proposed.agents):
        specs.append(proposed)
    # In the order the policies table gives them (priority, then id); a policy not created yet comes last.
    return sorted(specs, key=lambda s: (s.priority, s.id or float("inf")))


def gate_policy(*, policy, proposed: PolicySpec | None, user=None, purpose: str = "gate") -> GateVerdict:
    """governance.drafts' gate: `proposed` in place of `policy` (either may be None: a new policy, a deletion)."""
    in_force = tuple(a.slug for a in policy.agents.all()) if policy is not None else None
    agents = _governed(in_force, proposed.agents if proposed is not None else None)
    replaces = policy.pk if policy is not None else None
    by_agent: dict[str, list[PolicySpec]] = {}

    def after(case: GoldenCase) -> dict:
        slug = case.agent.slug
        if slug not in by_agent:
            by_agent[slug] = _with_draft(slug, replaces=replaces, proposed=proposed)
        return {"policies": by_agent[slug]}

    name = proposed.name if proposed is not None else policy.name
    what = "delete" if proposed is None else ("create" if policy is None else "update")
    verdict = run_gate(cases=_cases(agents), after=after, subject=f"policy {name}: {what}",
                       purpose=Purpose.LAB if purpose == "lab" else Purpose.GATE, user=user)
    verdict.report["agents_without_cases"] = _unchecked(agents, verdict.report["agents"])
    EvalRun.objects.filter(pk=verdict.eval_run_id).update(report=verdict.report)
    return verdict


def gate_skill(*, spec: dict, user=None, removal: bool = False) -> GateVerdict:
    """skills.services' gate: `spec` active (in place of the skill's version in force, if any), for
    every agent's golden set (a skill is matched by any agent's runs). `removal`: the world without the
    skill (`spec` is its version in force), for a change that takes it out of force: its contract
    constrained the runs, and the set shows whether the agents still behave without it."""
    def after(case: GoldenCase) -> dict:
        _, snapshot = freeze.governance_for_roles(agent_slug=case.agent.slug, username="eval:gate", roles=[])
        active = [s for s in (snapshot or {}).get("skills", []) if s["name"] != spec["name"]]
        return {"skills": sorted(active if removal else [*active, spec], key=lambda s: s["name"])}

    what = "take out of force" if removal else "activate"
    cases, subject = _cases(None), f"skill {spec['name']} v{spec.get('version')}: {what}"
    if not cases:
        # Nothing to check (a first load_demo imports its skills before its golden set): no eval run to keep.
        return GateVerdict(passed=True, eval_run_id=None, report={
            "subject": subject, "total": 0, "agents": [], "changed": [], "broken": [], "cases": [],
            "agents_without_cases": _unchecked(None, [])})
    verdict = run_gate(cases=cases, after=after, subject=subject, purpose=Purpose.GATE, user=user)
    verdict.report["agents_without_cases"] = _unchecked(None, verdict.report["agents"])
    EvalRun.objects.filter(pk=verdict.eval_run_id).update(report=verdict.report)
    return verdict


def _unchecked(agents: list[str] | None, checked: list[str]) -> list[str]:
    governed = agents if agents is not None else list(Agent.objects.values_list("slug", flat=True))
    return sorted(set(governed) - set(checked))
