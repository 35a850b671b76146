"""One step of the agent loop. Pure: (state, snapshot, deps) -> StepResult. No ORM, no Celery.

A step is one model call and the read-only tool calls it asked for (the first step also applies
the start: screening, policies, skills). The calls at the head of the model's reply that the gate
allows and that have no side effect run in the same step, and are checkpointed with the model
call; the first call that has a side effect, needs a person or is refused ends the step there,
and the next step runs the rest of the batch (runs.tool_batch), each call through the gate again.
So a redelivered step repeats the model call and those read-only calls, never a side effect: a
side effect runs only in a batch step of its own, through the outbox, and a call that waits for
a person parks at that step's checkpoint. If the model call spent the token budget or the
deadline passed, the step ends after the model call and the next one stops the run. A model call
whose estimated cost is over the tokens left is not made (runs.budget). A spent budget stops the
run, or, when the agent names a budget role, parks it for an extension.

A fast model (a local one, the scripted backend) answers in milliseconds, and a checkpoint costs
more than its turn: a step then goes on to the next model call while it is young (runs.advance
says, through `go_on`), but never past a batch with a side effect, a call left pending, a park or
the end. A redelivered step so repeats at most that much of model calls and read-only tool
calls; side effects stay in steps of their own.

A step returns the new state, the trace events it produced and an outcome; runs.lifecycle
persists all three at once. The state goes in and comes out as stored (RunState.to_json());
inside the step it is a RunState (runs.state).
"""

import json
from typing import Callable

import jsonschema

from agents.backends.base import ModelOutputInvalid, ModelUnavailable
from governance import engine
from governance.gate import skill_allowed
from governance.taint import opening_taint, shown_tools, untrusted_description
from runs import budget, context
from runs.outcomes import Continue, Deps, Finish, Park, ParkBudget, StepResult, unusable_twice
from runs.state import RunState
from runs.states import ErrorCode, RunStatus, StopReason
from runs.tool_batch import activate_skill, call_digest, decision_key, run_tools
from skills.matcher import match_skills

# What runs.services and the tests use, wherever it is defined.
__all__ = ["Continue", "Deps", "Finish", "Park", "ParkBudget", "StepResult", "call_digest", "decision_key",
           "initial_state", "step"]

MAX_OUTPUT_REPAIRS = 1


def initial_state(input_text: str) -> dict:
    return RunState.start(input_text).to_json()


def step(
    state: dict,
    snapshot: dict,
    deps: Deps,
    *,
    run_id: str,
    cancel_requested: bool,
    deadline: float | None,
    decisions: dict[str, dict],
    go_on: Callable[[float], bool] | None = None,
) -> StepResult:
    """Advance the run by one step. `state` is left as it was (the step works on a copy);
    `decisions` maps decision_key(call id, digest) to an approval's outcome.

    `go_on(seconds the step has taken)`: asked when a model call's calls all ran (read-only,
    allowed), or a batch of read-only calls did (approved ones, say); True makes the next model
    call in the same step, so fast turns share one checkpoint. A batch with a side effect in it,
    or a call left pending, ends the step as it would. None: one model call a step."""
    run, events = RunState.from_json(state), []
    started = deps.now()
    try:
        while True:
            effect = any(_has_effect(snapshot, call) for call in run.pending)
            outcome = _advance(run, snapshot, deps, events, run_id=run_id, cancel_requested=cancel_requested,
                               deadline=deadline, decisions=decisions)
            if effect or run.pending or not isinstance(outcome, Continue) or go_on is None \
                    or not go_on(deps.now() - started):
                break
    except engine.PolicyEvaluationError as exc:
        events.append(("policy_error", {"policy": exc.policy, "reason": exc.reason}))
        outcome = Finish(RunStatus.FAILED, error=ErrorCode.POLICY_ERROR, message=str(exc))
    return StepResult(state=run.to_json(), outcome=outcome, events=events)


def _has_effect(snapshot: dict, call: dict) -> bool:
    """Whether a pending call may have a side effect (a name the snapshot does not know is taken as one)."""
    tool = snapshot["tools"].get(call["name"])
    return tool is None or bool(tool["side_effect"])


def _advance(state: RunState, snapshot: dict, deps: Deps, events: list, *, run_id, cancel_requested, deadline,
             decisions) -> Continue | Park | Finish:
    agent = snapshot["agent"]
    if state.phase == "start":
        # The start (policies, screening, skills) is not a step of its own: the first model
        # call follows it in the same step and checkpoint, unless an intent guard ended the run.
        if (blocked := _begin(state, snapshot, events)) is not None:
            return blocked
    if cancel_requested:
        return Finish(RunStatus.CANCELLED, message="cancelled at the caller's request")
    if (refused := budget.settle(state, events, decisions)) is not None:
        return refused
    if (spent := budget.spent(state, agent, deps.now(), deadline)) is not None:
        return budget.run_out(state, agent, spent, run_id=run_id)
    if state.pending:
        return run_tools(state, snapshot, deps, events, run_id=run_id, decisions=decisions)
    if state.turns >= budget.limit(state, agent, StopReason.MAX_TURNS):
        return budget.run_out(state, agent, StopReason.MAX_TURNS, run_id=run_id)
    outcome = _call_model(state, snapshot, deps, events, run_id=run_id)
    if not state.pending or budget.spent(state, agent, deps.now(), deadline) is not None:
        return outcome
    # The read-only calls the model asked for go with it (no approval can have been asked for
    # calls made just now, so no decisions are consulted).
    return run_tools(state, snapshot, deps, events, run_id=run_id, decisions={}, read_only=True)


def _begin(state: RunState, snapshot: dict, events: list) -> Finish | None:
    """Check the policies, screen what the model will read, add playbooks and a matching skill.
    A Finish when an intent guard blocks the input."""
    specs, agent, text = context.policies(snapshot), snapshot["agent"]["slug"], state.input_text
    engine.check_all(specs, agent=agent)
    guard = engine.intent_guard(specs, agent=agent, text=text)
    if guard is not None:
        spec, decision = guard
        state.fired.append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "blocked"}))
        state.phase = "done"
        return Finish(RunStatus.BLOCKED, output=spec.response)
    for origin, patterns in opening_taint(snapshot, text):
        events.append(("tainted", state.taint(origin, patterns)))
    tools = snapshot["tools"]
    state.untrusted_descriptions += [name for name in shown_tools(snapshot) if untrusted_description(tools[name])]
    for spec, decision in engine.input_decisions(specs, agent=agent, text=text, type_="playbook"):
        state.playbooks.append(spec.id)
        state.fired.append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "playbook added"}))
    if matched := match_skills(snapshot.get("skills", []), text):
        activate_skill(state, events, matched[0]["name"], why={"matched": matched[0]["matched"]},
                       body=matched[0].get("body", ""))
    state.phase = "running"
    return None


def _call_model(state: RunState, snapshot: dict, deps: Deps, events: list, *, run_id: str,
                ) -> Continue | ParkBudget | Finish:
    narrowed = _skill_narrowed(snapshot, state)
    request = context.build_request(narrowed, state.to_json())
    profile, agent = snapshot["agent"]["model_profile"], snapshot["agent"]
    # Refused before it is made, not found out after: a call that may cost more than is left.
    left = budget.limit(state, agent, StopReason.TOKEN_BUDGET) - budget.used(state, agent, StopReason.TOKEN_BUDGET)
    if (cost := budget.estimate(request, profile)) > left:
        events.append(("model_call_refused", {"reason": StopReason.TOKEN_BUDGET, "estimated_tokens": cost,
                                              "tokens_left": left}))
        return budget.run_out(state, agent, StopReason.TOKEN_BUDGET, run_id=run_id, needed=cost - left,
                              estimated=cost)
    shown = [t["name"] for t in request.tools]
    # A tool guide shapes what the model reads: recorded (trace, receipt) the first time it is shown.
    for decision in context.guides_shown(narrowed, shown):
        if (explained := decision.explain()) not in state.fired:
            state.fired.append(explained)
            events.append(("policy_decision", explained | {"effect": "guidance shown"}))
    started = deps.now()
    try:
        response = deps.complete(request)
    except ModelUnavailable as exc:
        events.extend(("model_attempt", attempt) for attempt in exc.attempts)
        latency_ms = int((deps.now() - started) * 1000)
        state.model_calls.append(_call_record(profile, None, latency_ms, outcome="unavailable"))
        events.append(("model_error", {"requested_model": request.model, "error": str(exc)}))
        return Finish(RunStatus.FAILED, error=ErrorCode.MODEL_UNAVAILABLE, message=str(exc))
    except ModelOutputInvalid as exc:
        events.extend(("model_attempt", attempt) for attempt in exc.attempts)
        call = _count_call(state, profile, exc, int((deps.now() - started) * 1000), outcome="invalid_output")
        events.append(("model_call", call | {"tools_shown": shown, "tool_calls": []}))
        events.append(("model_output_invalid", {"problem": exc.problem, "turn": state.turns}))
        if state.malformed(state.turns):
            return unusable_twice(exc.problem)
        state.messages.append({"role": "user", "content": (
            f"Your last reply could not be used: {exc.problem}. Reply again; call only the tools listed, "
            "by their exact names, with arguments as a JSON object matching their schema."
        )})
        return Continue()
    events.extend(("model_attempt", attempt) for attempt in response.attempts)
    call = _count_call(state, profile, response, int((deps.now() - started) * 1000), outcome="ok")
    events.append(("model_call", call | {"tools_shown": shown, "tool_calls": [c.name for c in response.tool_calls]}))
    # Call ids are ours, not the model's: unique in the run, they key approvals and the outbox.
    calls = [{"id": f"call_{state.turns}_{index}", "name": c.name, "arguments": c.arguments, "step": state.turns}
             for index, c in enumerate(response.tool_calls, start=1)]
    state.messages.append({"role": "assistant", "content": response.text, "tool_calls": [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls
    ]})
    if calls:
        state.pending, state.rationale = calls, response.text
        return Continue()
    return _finish_answer(state, snapshot, events, response.text)


def _call_record(profile: dict, reply, latency_ms: int, *, outcome: str) -> dict:
    """One model call as the receipt shows it: requested vs actual, so a fallback is visible."""
    usage = reply.usage if reply is not None else None
    return {
        "requested_model": profile["model"],
        "requested_backend": profile["backend"],
        "profile": (reply.profile if reply is not None else "") or profile.get("name", ""),
        "actual_model": reply.model if reply is not None else None,
        "backend": reply.backend if reply is not None else None,
        "input_tokens": usage.input_tokens if usage else 0,
        "output_tokens": usage.output_tokens if usage else 0,
        "cache_read_tokens": usage.cache_read_tokens if usage else 0,
        "cache_creation_tokens": usage.cache_creation_tokens if usage else 0,
        "tokens_estimated": usage.estimated if usage else False,
        "latency_ms": latency_ms,
        "attempts": len(reply.attempts) if reply is not None else 0,
        "outcome": outcome,
    }


def _count_call(state: RunState, profile: dict, reply, latency_ms: int, *, outcome: str) -> dict:
    state.turns += 1
    state.input_tokens += reply.usage.input_tokens
    state.output_tokens += reply.usage.output_tokens
    call = _call_record(profile, reply, latency_ms, outcome=outcome)
    state.model_calls.append(call)
    return call


def _finish_answer(state: RunState, snapshot: dict, events: list, text: str) -> Continue | Finish:
    schema = snapshot["agent"].get("output_schema")
    if schema and (problem := _contract_problem(schema, text)):
        events.append(("output_invalid", {"problem": problem, "repairs": state.repairs}))
        if state.repairs >= MAX_OUTPUT_REPAIRS:
            return Finish(RunStatus.FAILED, output=text, error=ErrorCode.INVALID_OUTPUT, message=problem)
        state.repairs += 1
        state.messages.append({"role": "user", "content": (
            f"Your answer does not meet the output contract: {problem}. Reply again with only JSON that does."
        )})
        return Continue()
    specs, agent = context.policies(snapshot), snapshot["agent"]["slug"]
    formatters = engine.input_decisions(specs, agent=agent, text=state.input_text, type_="output_formatter")
    if formatters:
        spec, decision = formatters[0]
        text = engine.format_output(spec, answer=text)
        state.fired.append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "output formatted"}))
    state.phase = "done"
    return Finish(RunStatus.SUCCEEDED, output=text)


def _contract_problem(schema: dict, text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return "the answer is not JSON"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return exc.message
    return ""


def _skill_narrowed(snapshot: dict, state: RunState) -> dict:
    """The snapshot as the model may see it: an active skill's contract hides the tools outside it."""
    allowed = skill_allowed(snapshot, state.active_skills)
    if allowed is None:
        return snapshot
    return snapshot | {"granted_tools": [n for n in snapshot["granted_tools"] if n in allowed]}
