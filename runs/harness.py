"""One step of the agent loop. Pure: (state, snapshot, deps) -> StepResult. No ORM, no Celery.

A step is the start screening, one model call, or one batch of tool calls. It returns the new
state, the trace events it produced and an outcome; runs.services persists all three at once.
"""

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable

import jsonschema

from agents.backends.base import ModelRequest, ModelResponse, ModelUnavailable
from agents.tools.envelopes import error as error_envelope
from governance import engine
from governance.screening import screen
from runs import arguments, context
from runs.states import ErrorCode, RunStatus, StopReason
from skills.matcher import match_skills

MAX_OUTPUT_REPAIRS = 1


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def call_digest(*, run_id: str, step: int, tool: str, arguments: dict) -> str:
    """What an approval is bound to: this run, this step, this tool, exactly these arguments."""
    return hashlib.sha256(canonical([run_id, step, tool, arguments]).encode()).hexdigest()


def decision_key(call_id: str, digest: str) -> str:
    """One approval covers one call: two identical calls in a batch are two requests."""
    return f"{call_id}:{digest}"


@dataclass(frozen=True)
class Deps:
    complete: Callable[[ModelRequest], ModelResponse]
    execute: Callable[..., dict]  # (call, *, side_effect, approval_id) -> envelope
    granted_now: Callable[[], set[str]]
    now: Callable[[], float] = time.time


@dataclass(frozen=True)
class Continue:
    pass


@dataclass(frozen=True)
class Park:
    call_id: str
    step: int
    tool: str
    arguments: dict
    arguments_sha256: str
    approver_role: str
    ttl_seconds: int | None
    policy: dict | None
    reasons: list[str]
    rationale: str


@dataclass(frozen=True)
class Finish:
    status: RunStatus
    output: str = ""
    stop_reason: str = ""
    error: str = ""
    message: str = ""


@dataclass
class StepResult:
    state: dict
    outcome: Continue | Park | Finish
    events: list[tuple[str, dict]] = field(default_factory=list)


def initial_state(input_text: str) -> dict:
    return {
        "phase": "start",
        "messages": [{"role": "user", "content": input_text}],
        "pending": [],
        "turns": 0,
        "tool_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "repairs": 0,
        "playbooks": [],
        "active_skills": [],
        "fired": [],
        "model_calls": [],
        "tool_log": [],
        "tainted": False,
        "taint_reasons": [],
    }


def step(
    state: dict,
    snapshot: dict,
    deps: Deps,
    *,
    run_id: str,
    cancel_requested: bool,
    deadline: float | None,
    decisions: dict[str, dict],
) -> StepResult:
    """Advance the run by one step. `decisions` maps decision_key(call id, digest) to an approval's outcome."""
    result = StepResult(state=copy.deepcopy(state), outcome=Continue())
    try:
        if result.state["phase"] == "start":
            _begin(result, snapshot)
        elif (stop := _stop_condition(result.state, snapshot, deps, cancel_requested, deadline)) is not None:
            result.outcome = stop
        elif result.state["pending"]:
            _run_tools(result, snapshot, deps, run_id=run_id, decisions=decisions)
        elif result.state["turns"] >= snapshot["agent"]["max_turns"]:
            result.outcome = Finish(RunStatus.STOPPED, stop_reason=StopReason.MAX_TURNS)
        else:
            _call_model(result, snapshot, deps)
    except engine.PolicyEvaluationError as exc:
        result.events.append(("policy_error", {"policy": exc.policy, "reason": exc.reason}))
        result.outcome = Finish(RunStatus.FAILED, error=ErrorCode.POLICY_ERROR, message=str(exc))
    return result


def _stop_condition(state, snapshot, deps, cancel_requested, deadline) -> Finish | None:
    agent = snapshot["agent"]
    if cancel_requested:
        return Finish(RunStatus.CANCELLED, message="cancelled at the caller's request")
    if deadline is not None and deps.now() >= deadline:
        return Finish(RunStatus.STOPPED, stop_reason=StopReason.DEADLINE)
    if state["input_tokens"] + state["output_tokens"] >= agent["max_tokens"]:
        return Finish(RunStatus.STOPPED, stop_reason=StopReason.TOKEN_BUDGET)
    return None


def _taint(state: dict, origin: str, reasons: list[str]) -> dict | None:
    if not reasons:
        return None
    state["tainted"] = True
    state["taint_reasons"].append(f"{origin}: {', '.join(reasons)}")
    return {"origin": origin, "patterns": reasons}


def _begin(result: StepResult, snapshot: dict) -> None:
    state, events = result.state, result.events
    specs = context.policies(snapshot)
    agent = snapshot["agent"]["slug"]
    text = state["messages"][0]["content"]
    engine.check_all(specs, agent=agent)

    guard = engine.intent_guard(specs, agent=agent, text=text)
    if guard is not None:
        spec, decision = guard
        state["fired"].append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "blocked"}))
        state["phase"] = "done"
        result.outcome = Finish(RunStatus.BLOCKED, output=spec.response)
        return

    if (taint := _taint(state, "input", screen(text))) is not None:
        events.append(("tainted", taint))
    for spec, decision in engine.input_decisions(specs, agent=agent, text=text, type_="playbook"):
        state["playbooks"].append(spec.id)
        state["fired"].append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "playbook added"}))
    matched = match_skills(snapshot.get("skills", []), text)
    if matched:
        _activate_skill(state, events, matched[0]["name"], why={"matched": matched[0]["matched"]})
    state["phase"] = "running"


def _activate_skill(state: dict, events: list, name: str, *, why: dict) -> None:
    if name not in state["active_skills"]:
        state["active_skills"].append(name)
        events.append(("skill_activated", {"skill": name} | why))


def _call_model(result: StepResult, snapshot: dict, deps: Deps) -> None:
    state, events = result.state, result.events
    request = context.build_request(snapshot, state)
    profile = snapshot["agent"]["model_profile"]
    started = deps.now()
    try:
        response = deps.complete(request)
    except ModelUnavailable as exc:
        events.append(("model_error", {"requested_model": request.model, "error": str(exc)}))
        result.outcome = Finish(RunStatus.FAILED, error=ErrorCode.MODEL_UNAVAILABLE, message=str(exc))
        return
    latency_ms = int((deps.now() - started) * 1000)
    state["turns"] += 1
    state["input_tokens"] += response.usage.input_tokens
    state["output_tokens"] += response.usage.output_tokens
    call = {
        "requested_model": profile["model"],
        "actual_model": response.model,
        "backend": response.backend,
        "input_tokens": response.usage.input_tokens,
        "output_tokens": response.usage.output_tokens,
        "tokens_estimated": response.usage.estimated,
        "latency_ms": latency_ms,
    }
    state["model_calls"].append(call)
    events.append(("model_call", call | {"tools_shown": [t["name"] for t in request.tools],
                                         "tool_calls": [c.name for c in response.tool_calls]}))
    # Call ids are ours, not the model's: unique in the run, they key approvals and the outbox.
    calls = [
        {"id": f"call_{state['turns']}_{index}", "name": c.name, "arguments": c.arguments, "step": state["turns"]}
        for index, c in enumerate(response.tool_calls, start=1)
    ]
    state["messages"].append({"role": "assistant", "content": response.text, "tool_calls": [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls
    ]})
    if calls:
        state["pending"] = calls
        state["rationale"] = response.text
        return
    _finish_answer(result, snapshot, response.text)


def _finish_answer(result: StepResult, snapshot: dict, text: str) -> None:
    state, events = result.state, result.events
    schema = snapshot["agent"].get("output_schema")
    if schema:
        problem = _contract_problem(schema, text)
        if problem:
            events.append(("output_invalid", {"problem": problem, "repairs": state["repairs"]}))
            if state["repairs"] >= MAX_OUTPUT_REPAIRS:
                result.outcome = Finish(RunStatus.FAILED, output=text, error=ErrorCode.INVALID_OUTPUT, message=problem)
                return
            state["repairs"] += 1
            state["messages"].append({"role": "user", "content": (
                f"Your answer does not meet the output contract: {problem}. Reply again with only JSON that does."
            )})
            return
    specs = context.policies(snapshot)
    agent = snapshot["agent"]["slug"]
    formatters = engine.input_decisions(specs, agent=agent, text=state["messages"][0]["content"], type_="output_formatter")
    if formatters:
        spec, decision = formatters[0]
        text = engine.format_output(spec, answer=text)
        state["fired"].append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "output formatted"}))
    state["phase"] = "done"
    result.outcome = Finish(RunStatus.SUCCEEDED, output=text)


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


def _refusal(snapshot: dict, deps: Deps, state: dict, call: dict) -> dict | None:
    """The envelope refusing `call` before it runs, or None when it may go ahead."""
    name, tools = call["name"], snapshot["tools"]
    if name not in snapshot["agent"]["tools"] or name not in tools:
        return error_envelope("unknown_tool", f"there is no tool named {name!r} for this agent")
    # Checked against the frozen grants and again against the live ones: a revoked grant bites at once.
    if name not in context.visible_tools(snapshot) or name not in deps.granted_now():
        return error_envelope("not_permitted", f"the caller's roles may not use {name!r}")
    allowed = _skill_allowed(snapshot, state)
    if allowed is not None and name not in allowed:
        return error_envelope("not_permitted", f"{name!r} is outside the active skill's allowed tools")
    try:
        arguments.validate(call["arguments"], tools[name]["input_schema"])
    except jsonschema.ValidationError as exc:
        return error_envelope("invalid_arguments", exc.message, path=list(exc.absolute_path))
    except jsonschema.SchemaError as exc:
        return error_envelope("invalid_arguments", f"the tool's schema is broken: {exc.message}")
    return None


def _skill_allowed(snapshot: dict, state: dict) -> set[str] | None:
    by_name = {s["name"]: s for s in snapshot.get("skills", [])}
    contracts = [by_name[n]["allowed_tools"] for n in state["active_skills"] if by_name[n]["allowed_tools"]]
    if not contracts:
        return None
    return set().union(*contracts)


def _approval_needed(snapshot: dict, state: dict, call: dict) -> tuple[str, int | None, dict | None, list[str]] | None:
    """(approver role, ttl, policy decision, reasons) when this call must wait for a human."""
    specs = context.policies(snapshot)
    agent = snapshot["agent"]["slug"]
    tool = snapshot["tools"][call["name"]]
    found = engine.tool_approval(specs, agent=agent, tool=call["name"], text=state["messages"][0]["content"])
    if found is not None:
        spec, decision = found
        return spec.approver_role, spec.approval_ttl_seconds, decision.explain(), [f"policy {spec.name} v{spec.version}"]
    if tool["side_effect"] and state["tainted"]:
        role = snapshot.get("taint_approver_role")
        if not role:
            raise engine.PolicyEvaluationError("tainted-run rule", "no approver role is configured for tainted runs")
        return role, None, None, ["the run is tainted: " + "; ".join(state["taint_reasons"])]
    return None


def _run_tools(result: StepResult, snapshot: dict, deps: Deps, *, run_id: str, decisions: dict) -> None:
    state, events = result.state, result.events
    while state["pending"]:
        call = state["pending"][0]
        if call["name"] == context.LOAD_SKILL:
            envelope = _load_skill(state, events, snapshot, call)
            _record(state, events, call, envelope, duration_ms=0, approval_id=None, count=False)
            continue
        if state["tool_calls"] >= snapshot["agent"]["max_tool_calls"]:
            result.outcome = Finish(RunStatus.STOPPED, stop_reason=StopReason.TOOL_BUDGET)
            return
        refusal = _refusal(snapshot, deps, state, call)
        if refusal is not None:
            events.append(("tool_refused", {"call_id": call["id"], "tool": call["name"], "code": refusal["code"],
                                            "reason": refusal["error"]}))
            _record(state, events, call, refusal, duration_ms=0, approval_id=None)
            continue
        approval_id = None
        needed = _approval_needed(snapshot, state, call)
        if needed is not None:
            role, ttl, policy, reasons = needed
            digest = call_digest(run_id=run_id, step=call["step"], tool=call["name"], arguments=call["arguments"])
            decision = decisions.get(decision_key(call["id"], digest))
            if decision is None or decision["status"] == "pending":
                if policy:
                    state["fired"].append(policy)
                result.outcome = Park(
                    call_id=call["id"], step=call["step"], tool=call["name"], arguments=call["arguments"],
                    arguments_sha256=digest, approver_role=role, ttl_seconds=ttl, policy=policy,
                    reasons=reasons, rationale=state.get("rationale", ""),
                )
                return
            if decision["status"] != "approved":
                envelope = error_envelope(
                    decision["status"] if decision["status"] == "expired" else "denied",
                    f"the call to {call['name']} was {decision['status']}; it did not run",
                    reason=decision.get("reason", ""), approval_id=decision["id"],
                )
                _record(state, events, call, envelope, duration_ms=0, approval_id=decision["id"])
                continue
            approval_id = decision["id"]
        started = deps.now()
        envelope = deps.execute(call, side_effect=snapshot["tools"][call["name"]]["side_effect"], approval_id=approval_id)
        _record(state, events, call, envelope, duration_ms=int((deps.now() - started) * 1000), approval_id=approval_id)
        if (taint := _taint(state, f"result of {call['name']}", screen(canonical(envelope), data=True))) is not None:
            events.append(("tainted", taint))


def _record(state, events, call, envelope, *, duration_ms, approval_id, count=True) -> None:
    state["pending"].pop(0)
    if count:
        state["tool_calls"] += 1
    entry = {"name": call["name"], "ok": envelope["ok"], "code": envelope.get("code", ""),
             "duration_ms": duration_ms, "approval_id": approval_id}
    state["tool_log"].append(entry)
    events.append(("tool_call", entry | {"call_id": call["id"], "arguments": call["arguments"], "result": envelope}))
    state["messages"].append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                              "content": canonical(envelope)})


def _load_skill(state, events, snapshot, call) -> dict:
    name = call["arguments"].get("name") if isinstance(call["arguments"], dict) else None
    skill = next((s for s in snapshot.get("skills", []) if s["name"] == name), None)
    if skill is None:
        return error_envelope("not_found", f"there is no skill named {name!r}")
    _activate_skill(state, events, name, why={"loaded_by": "model"})
    return {"ok": True, "data": {"name": name, "body": skill["body"]}}
