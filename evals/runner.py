"""Running golden cases: each through the real harness (runs.harness.step, the function a worker
loops), in isolation.

A case is not a run. Its snapshot is frozen as a run's would be (evals.snapshot), for a synthetic
caller in the case's roles; the steps are taken here, in this process, with dependencies that
answer every side effect from a sandbox (evals.sandbox); nothing is written to the runs tables
(no Run, event, approval request, side effect or receipt). The events the steps return are the
case's trace, stored redacted with its result. A case ends where a run would stop for a person
(a Park: awaiting_approval) or finish; a case with a decision answers the park itself, as an
approver would, and goes on. A read-only call is answered from the case's recordings where one
matches (evals.sandbox), so the verdict does not depend on what the live data is now.

run_case takes the snapshot as an argument, and evaluate the policies or skills to put in place of
those in force, so the same loop runs a case with a draft in place (the gate, evals.gating).
"""

import time
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent, ModelProfile
from core.api_errors import DomainError
from evals.expectations import actual_of, expected_of, failures
from evals.models import Decision, EvalResult, EvalRun, GoldenCase
from evals.recordings import replay_index
from evals.sandbox import Sandbox, eval_deps
from evals.snapshot import NoSnapshot, eval_snapshot
from governance import redaction
from governance.engine import PolicySpec
from runs import harness
from runs.states import RunStatus

# A bound on steps, whatever the agent's budgets: a case that loops is cut and fails.
MAX_STEPS = 100


class InvalidEvalRequest(DomainError):
    code = "invalid"


@dataclass
class CaseOutcome:
    actual: dict
    state: dict
    trace: list[tuple[int, str, dict]] = field(default_factory=list)  # (step, kind, data), as a run's events
    sandbox: list[dict] = field(default_factory=list)
    reads: list[dict] = field(default_factory=list)  # the read-only calls, answered by a recording or live
    duration_ms: int = 0


def run_case(case: GoldenCase, snapshot: dict, *, record: bool = False) -> CaseOutcome:
    """Run one case under `snapshot` to its park or its end; `record`: every read-only call live."""
    started = time.monotonic()
    run_id = f"eval-{uuid.uuid4()}"
    sandbox = Sandbox(run_id=run_id, caller=snapshot["caller"]["username"],
                      replay=None if record else replay_index(case.recordings))
    deps = eval_deps(snapshot, sandbox)
    state, trace, decisions = harness.initial_state(case.input), [], {}
    deadline = deps.now() + snapshot["agent"]["deadline_seconds"]
    outcome = {"status": RunStatus.FAILED.value, "output": "", "awaiting_tool": "", "stop_reason": "",
               "error": "internal", "message": f"no end within {MAX_STEPS} steps"}
    for number in range(MAX_STEPS):
        try:
            result = harness.step(state, snapshot, deps, run_id=run_id, cancel_requested=False, deadline=deadline,
                                  decisions=decisions)
        except Exception as exc:  # a bug in a step ends a run failed: the case too, saying what
            outcome |= {"message": f"{type(exc).__name__}: {exc}"}
            break
        state = result.state
        trace.extend((number, kind, data) for kind, data in result.events)
        step = result.outcome
        if isinstance(step, harness.ParkBudget):
            # A case holds the agent to its own limits: a budget that runs out ends it stopped, as
            # a run whose extension is refused ends (asking people for more is not what it tests).
            trace.append((number, "budget_requested", dict(step.budget)))
            outcome = {"status": RunStatus.STOPPED.value, "output": "", "awaiting_tool": "",
                       "stop_reason": step.budget["kind"], "error": "", "message": "the budget ran out"}
            break
        if isinstance(step, harness.Park):
            trace.append((number, "approval_requested", {"tool": step.tool, "arguments": step.arguments,
                                                 "approver_role": step.approver_role, "reasons": step.reasons}))
            if not case.decision:
                outcome = {"status": RunStatus.AWAITING_APPROVAL.value, "output": "", "awaiting_tool": step.tool,
                           "stop_reason": "", "error": "", "message": ""}
                break
            decision = decisions[harness.decision_key(step.call_id, step.arguments_sha256)] = _decide(case, len(decisions))
            trace.append((number, "approval_decided", {"tool": step.tool} | decision))
        elif isinstance(step, harness.Finish):
            outcome = {"status": str(step.status), "output": step.output, "awaiting_tool": "",
                       "stop_reason": step.stop_reason, "error": step.error, "message": step.message}
            break
    actual = actual_of([(kind, data) for _, kind, data in trace], state, outcome) | {
        "unrecorded": sandbox.unrecorded(), "replayed": sum(read["recorded"] for read in sandbox.reads)}
    return CaseOutcome(actual=actual, state=state, trace=trace, sandbox=sandbox.calls, reads=sandbox.reads,
                       duration_ms=int((time.monotonic() - started) * 1000))


def _decide(case: GoldenCase, index: int) -> dict:
    approved = case.decision == Decision.APPROVE
    return {"id": f"eval-approval-{index + 1}", "status": "approved" if approved else "denied",
            "reason": "" if approved else "denied by the golden case"}


def cases_for(agent_slug: str | None) -> list[GoldenCase]:
    cases = GoldenCase.objects.filter(enabled=True).select_related("agent")
    if agent_slug:
        cases = cases.filter(agent__slug=agent_slug)
    return list(cases)


def check_request(*, agent_slug: str | None, threshold, profile: str = "") -> tuple[Agent | None, float]:
    """The agent and the threshold an eval run is asked for, or InvalidEvalRequest saying what is wrong."""
    details = {}
    agent = None
    if agent_slug:
        agent = Agent.objects.filter(slug=agent_slug).first()
        if agent is None:
            details["agent"] = [f"unknown agent {agent_slug!r}"]
    try:
        threshold = float(threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError
    except (TypeError, ValueError):
        details["threshold"] = ["a number from 0 to 1 (the share of cases that must pass)"]
    if profile and not ModelProfile.objects.filter(name=profile).exists():
        details["profile"] = [f"unknown model profile {profile!r}"]
    if details:
        raise InvalidEvalRequest("; ".join(f"{k}: {v[0]}" for k, v in details.items()), details=details)
    return agent, threshold


def run_evals(*, agent_slug: str | None = None, threshold=1.0, profile: str = "", user=None) -> EvalRun:
    """Run the enabled golden cases (of one agent, or all) and store the results: the eval run,
    passed when its pass rate reaches `threshold`. No cases is a failed run (nothing was shown)."""
    agent, threshold = check_request(agent_slug=agent_slug, threshold=threshold, profile=profile)
    eval_run = EvalRun.objects.create(agent=agent, threshold=threshold, profile=profile,
                                      started_by=user if user is not None and user.is_authenticated else None)
    results = [result_of(eval_run, case, *evaluate(case, profile=profile)) for case in cases_for(agent_slug)]
    return store(eval_run, results)


def evaluate(case: GoldenCase, *, profile: str = "", policies: list[PolicySpec] | None = None,
             skills: list[dict] | None = None, record: bool = False) -> tuple[dict, dict, CaseOutcome | None, list[dict]]:
    """One case run (with `policies` or `skills` in place of those in force, when given; `record`:
    reading live to record it): its expectations, what happened, the outcome (None without a
    snapshot) and its redacted trace."""
    expected = expected_of(case)
    try:
        snapshot = eval_snapshot(agent_slug=case.agent.slug, roles=case.roles, username=f"eval:{case.name}",
                                 profile=profile, policies=policies, skills=skills)
    except NoSnapshot as exc:
        return expected, {"status": "no_snapshot", "message": str(exc)}, None, []
    kinds, secrets = settings.WARRANT["REDACT"], redaction.env_secrets()
    outcome = run_case(case, snapshot, record=record)
    outcome.actual["unrecorded"] = redaction.redact(outcome.actual["unrecorded"], kinds=kinds, secrets=secrets)
    trace = [{"step": step, "kind": kind, "data": redaction.redact(data, kinds=kinds, secrets=secrets)}
             for step, kind, data in outcome.trace]
    outcome.sandbox = [redaction.redact(call, kinds=kinds, secrets=secrets) for call in outcome.sandbox]
    return expected, outcome.actual, outcome, trace


def store(eval_run: EvalRun, results: list[EvalResult]) -> EvalRun:
    """Write the results and the eval run's verdict at its threshold."""
    with transaction.atomic():
        EvalResult.objects.bulk_create(results)
        passed = sum(r.passed for r in results)
        eval_run.total, eval_run.passed = len(results), passed
        eval_run.pass_rate = passed / len(results) if results else 0.0
        eval_run.status = (EvalRun.Status.PASSED if results and eval_run.pass_rate >= eval_run.threshold
                           else EvalRun.Status.FAILED)
        eval_run.finished_at = timezone.now()
        eval_run.save(update_fields=["total", "passed", "pass_rate", "status", "finished_at"])
    return eval_run


def result_of(eval_run, case, expected, actual, outcome: CaseOutcome | None, trace=()) -> EvalResult:
    if outcome is None:
        found = [{"expectation": "status", "expected": expected["status"], "actual": actual["message"]}]
    else:
        found = failures(expected, actual)
    return EvalResult(
        eval_run=eval_run, case=case, agent_slug=case.agent.slug, case_name=case.name, case_version=case.version,
        expected=expected,
        passed=not found, status=actual["status"], output=actual.get("output", ""), failures=found,
        actual={k: v for k, v in actual.items() if k != "output"}, sandbox=outcome.sandbox if outcome else [],
        trace=list(trace), duration_ms=outcome.duration_ms if outcome else 0,
    )
