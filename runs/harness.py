"""One step of the agent loop. Pure: (state, snapshot, deps) -> StepResult. No ORM, no Celery.

A step is the start screening, one model call, or one batch of tool calls. It returns the new
state, the trace events it produced and an outcome; runs.services persists all three at once.
"""

import hashlib
import json
import pickle
import time
from dataclasses import dataclass, field
from typing import Callable

import jsonschema

from agents.backends.base import ModelOutputInvalid, ModelRequest, ModelResponse, ModelUnavailable
from agents.tools import arguments
from agents.tools.envelopes import error as error_envelope
from governance import engine
from governance.approval_rule import approval_needed
from governance.screening import screen, screen_known, screen_value
from runs import context, provenance
from runs.states import ErrorCode, RunStatus, StopReason
from skills.matcher import match_skills

MAX_OUTPUT_REPAIRS = 1
# Refusals that mean the model got the call itself wrong, not that it was not allowed.
MALFORMED_CALL = ("unknown_tool", "invalid_arguments")
# Approval requests one run may raise (pending or decided) before further calls needing one are
# refused: a run, or a model talking to itself, cannot flood the approvers. Frozen per run.
DEFAULT_MAX_APPROVAL_REQUESTS = 5


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
    # Kinds of secret found in a call's arguments (API keys, card numbers); see governance.redaction.
    leaks: Callable[[dict], list[str]] = lambda arguments: []


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
    # For each argument: whether its value appeared in untrusted text, where, and what is wrong
    # with its addresses and URLs (runs.provenance). Computed here, once, for the approver's card.
    provenance: list = field(default_factory=list)


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
        # Where untrusted text came in: call ids of untrusted tools' results, names of the tools
        # whose descriptions came from an untrusted source (runs.provenance reads both).
        "untrusted_calls": [],
        "untrusted_descriptions": [],
        "parks": 0,  # times the run stopped for an approver: none means it has no approval requests
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
    # A deep copy, so a step that fails leaves the caller's state as it was; state is plain data,
    # and a pickle round trip copies it several times faster than copy.deepcopy.
    result = StepResult(state=pickle.loads(pickle.dumps(state, pickle.HIGHEST_PROTOCOL)), outcome=Continue())
    try:
        if result.state["phase"] == "start":
            # The start (policies, screening, skills) is not a step of its own: the first model
            # call follows it in the same step and checkpoint, unless an intent guard ended the run.
            _begin(result, snapshot)
            if result.state["phase"] != "running":
                return result
        if (stop := _stop_condition(result.state, snapshot, deps, cancel_requested, deadline)) is not None:
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


UNTRUSTED = "untrusted source"


def _taint(state: dict, origin: str, reasons: list[str]) -> dict | None:
    if not reasons:
        return None
    state["tainted"] = True
    line = f"{origin}: {', '.join(reasons)}"
    if line not in state["taint_reasons"]:  # the same tool read ten times is one reason, not ten
        state["taint_reasons"].append(line)
    return {"origin": origin, "patterns": reasons}


def _discovered(tool: dict) -> bool:
    """Its description was written elsewhere: an MCP server's or an OpenAPI document's words.
    (A Python source's are docstrings of code the platform engineer allowed, like ours.)"""
    return tool.get("source") in ("mcp", "openapi")


def _read_untrusted(state: dict, call: dict, tool: dict, envelope: dict) -> dict | None:
    """Taint by provenance: what an untrusted tool said taints the run, whatever its words; the
    screen's findings say what else it looked like. A trusted tool taints only when screened."""
    found = screen_value(envelope, data=True)
    # A snapshot frozen before trust marks existed has no "trusted": untrusted, so it fails closed.
    if not tool.get("trusted", False):
        state.setdefault("untrusted_calls", []).append(call["id"])
        found = [UNTRUSTED] + found
    return _taint(state, f"result of {call['name']}", found)


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
    # Tool descriptions can come from outside (MCP servers, OpenAPI documents) and reach the
    # model verbatim: a poisoned description is an injection like any other.
    for name in context.visible_tools(snapshot):
        description = snapshot["tools"][name].get("description", "")
        found = screen_known(description)
        tool = snapshot["tools"][name]
        if _discovered(tool) and not tool.get("trusted", False):
            # Shown to the model verbatim: a source that is not trusted taints from the start.
            state.setdefault("untrusted_descriptions", []).append(name)
            found = [UNTRUSTED] + found
        if (taint := _taint(state, f"description of tool {name}", found)) is not None:
            events.append(("tainted", taint))
    for spec, decision in engine.input_decisions(specs, agent=agent, text=text, type_="playbook"):
        state["playbooks"].append(spec.id)
        state["fired"].append(decision.explain())
        events.append(("policy_decision", decision.explain() | {"effect": "playbook added"}))
    matched = match_skills(snapshot.get("skills", []), text)
    if matched:
        _activate_skill(state, events, matched[0]["name"], why={"matched": matched[0]["matched"]},
                        body=matched[0].get("body", ""))
    state["phase"] = "running"


def _activate_skill(state: dict, events: list, name: str, *, why: dict, body: str = "") -> None:
    if name not in state["active_skills"]:
        state["active_skills"].append(name)
        events.append(("skill_activated", {"skill": name} | why))
        # Skills are imported text: their steps name tools (normal), but overrides, role changes
        # or hidden text in a body are injected instructions like any other.
        if (taint := _taint(state, f"skill {name}", screen_known(body))) is not None:
            events.append(("tainted", taint))


def _call_model(result: StepResult, snapshot: dict, deps: Deps) -> None:
    state, events = result.state, result.events
    narrowed = _skill_narrowed(snapshot, state)
    request = context.build_request(narrowed, state)
    # A tool guide shapes what the model reads: recorded (trace, receipt) the first time it is shown.
    for decision in context.guides_shown(narrowed, [t["name"] for t in request.tools]):
        if (explained := decision.explain()) not in state["fired"]:
            state["fired"].append(explained)
            events.append(("policy_decision", explained | {"effect": "guidance shown"}))
    profile = snapshot["agent"]["model_profile"]
    started = deps.now()
    try:
        response = deps.complete(request)
    except ModelUnavailable as exc:
        events.extend(("model_attempt", attempt) for attempt in exc.attempts)
        latency_ms = int((deps.now() - started) * 1000)
        state["model_calls"].append(_call_record(profile, None, latency_ms, outcome="unavailable"))
        events.append(("model_error", {"requested_model": request.model, "error": str(exc)}))
        result.outcome = Finish(RunStatus.FAILED, error=ErrorCode.MODEL_UNAVAILABLE, message=str(exc))
        return
    except ModelOutputInvalid as exc:
        events.extend(("model_attempt", attempt) for attempt in exc.attempts)
        call = _count_call(state, profile, exc, int((deps.now() - started) * 1000), outcome="invalid_output")
        events.append(("model_call", call | {"tools_shown": [t["name"] for t in request.tools], "tool_calls": []}))
        events.append(("model_output_invalid", {"problem": exc.problem, "turn": state["turns"]}))
        _malformed(result, state["turns"], exc.problem, remind=True)
        return
    events.extend(("model_attempt", attempt) for attempt in response.attempts)
    call = _count_call(state, profile, response, int((deps.now() - started) * 1000), outcome="ok")
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


def _count_call(state: dict, profile: dict, reply, latency_ms: int, *, outcome: str) -> dict:
    state["turns"] += 1
    state["input_tokens"] += reply.usage.input_tokens
    state["output_tokens"] += reply.usage.output_tokens
    call = _call_record(profile, reply, latency_ms, outcome=outcome)
    state["model_calls"].append(call)
    return call


def _malformed(result: StepResult, turn: int, problem: str, *, remind: bool) -> bool:
    """A model turn that could not be used. The model gets one turn to repair it; a second
    malformed turn in a row fails the run. True when the run fails."""
    state = result.state
    if state.get("malformed_turn") == turn - 1:
        result.outcome = Finish(RunStatus.FAILED, error=ErrorCode.INVALID_OUTPUT,
                                message=f"the model's reply was unusable twice in a row: {problem}")
        return True
    state["malformed_turn"] = turn
    if remind:  # a refused call needs no reminder: its error envelope is the model's feedback
        state["messages"].append({"role": "user", "content": (
            f"Your last reply could not be used: {problem}. Reply again; call only the tools listed, "
            "by their exact names, with arguments as a JSON object matching their schema."
        )})
    return False


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
    if allowed is not None and tools[name]["side_effect"] and name not in _skill_side_effects(snapshot, state):
        return error_envelope("not_permitted", f"{name!r} changes things, and the active skill does not declare it "
                                               "among its side effects")
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


def _skill_side_effects(snapshot: dict, state: dict) -> set[str]:
    """What the active skills with a contract (allowed tools) may change: their declared side
    effects (none, unless named). A skill without a contract constrains nothing."""
    by_name = {s["name"]: s for s in snapshot.get("skills", [])}
    return {tool for n in state["active_skills"] if by_name[n]["allowed_tools"]
            for tool in by_name[n].get("side_effects", [])}


def _skill_narrowed(snapshot: dict, state: dict) -> dict:
    """The snapshot as the model may see it: an active skill's contract hides the tools outside it."""
    allowed = _skill_allowed(snapshot, state)
    if allowed is None:
        return snapshot
    return snapshot | {"granted_tools": [n for n in snapshot["granted_tools"] if n in allowed]}


def _approval_needed(snapshot: dict, state: dict, call: dict, deps: Deps) -> tuple[str, int | None, dict | None, list[str]] | None:
    """(approver role, ttl, policy decision, reasons) when this call must wait for a human."""
    specs = context.policies(snapshot)
    agent = snapshot["agent"]["slug"]
    tool = snapshot["tools"][call["name"]]
    found = engine.tool_approval(specs, agent=agent, tool=call["name"], text=state["messages"][0]["content"])
    must = ["the run is tainted: " + "; ".join(state["taint_reasons"])] if state["tainted"] else []
    if tool["side_effect"]:
        # A secret on its way out, or an address that is not what it looks like, is never the
        # model's call to make, whatever the policies say.
        if leaked := deps.leaks(call["arguments"]):
            must.append("the arguments carry a secret: " + ", ".join(leaked))
        if spoofed := provenance.flags(call["arguments"]):
            must.append("an address or URL is not what it looks like: " + "; ".join(spoofed))
    needed = approval_needed(tool_name=call["name"], tool=tool, found=found, must_approve=must,
                             taint_approver_role=snapshot.get("taint_approver_role", ""))
    if needed is None:
        return None
    return needed.approver_role, needed.ttl_seconds, needed.policy, needed.reasons


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
            if refusal["code"] in MALFORMED_CALL and state.get("malformed_turn") != call["step"]:
                if _malformed(result, call["step"], refusal["error"], remind=False):
                    return
            continue
        approval_id = None
        needed = _approval_needed(snapshot, state, call, deps)
        if needed is not None:
            role, ttl, policy, reasons = needed
            digest = call_digest(run_id=run_id, step=call["step"], tool=call["name"], arguments=call["arguments"])
            decision = decisions.get(decision_key(call["id"], digest))
            limit = snapshot.get("limits", {}).get("max_approval_requests", DEFAULT_MAX_APPROVAL_REQUESTS)
            if decision is None and len(decisions) >= limit:
                envelope = error_envelope("approval_limit", (
                    f"this run already raised {len(decisions)} approval requests, the most it may; "
                    f"{call['name']} did not run"))
                events.append(("tool_refused", {"call_id": call["id"], "tool": call["name"], "code": "approval_limit",
                                                "reason": envelope["error"]}))
                _record(state, events, call, envelope, duration_ms=0, approval_id=None)
                continue
            if decision is None or decision["status"] == "pending":
                if policy:
                    state["fired"].append(policy)
                state["parks"] = state.get("parks", 0) + 1
                # Kept in the state as read (the trace is redacted): the approver's card shows it.
                found = provenance.arguments_provenance(call["arguments"], provenance.untrusted_texts(state, snapshot))
                state.setdefault("provenance", {})[call["id"]] = found
                result.outcome = Park(
                    call_id=call["id"], step=call["step"], tool=call["name"], arguments=call["arguments"],
                    arguments_sha256=digest, approver_role=role, ttl_seconds=ttl, policy=policy,
                    reasons=reasons, rationale=state.get("rationale", ""), provenance=found,
                )
                return
            if decision["status"] != "approved":
                # An expired request counts as denied (the code says so); `decision` says which it was.
                envelope = error_envelope(
                    "denied", f"the call to {call['name']} was {decision['status']}; it did not run",
                    decision=decision["status"], reason=decision.get("reason", ""), approval_id=decision["id"],
                )
                _record(state, events, call, envelope, duration_ms=0, approval_id=decision["id"])
                # The approver's words reach the model: they are screened like any other text.
                if (taint := _taint(state, "approval comment", screen(decision.get("reason", ""), data=True))):
                    events.append(("tainted", taint))
                continue
            approval_id = decision["id"]
        started = deps.now()
        envelope = deps.execute(call, side_effect=snapshot["tools"][call["name"]]["side_effect"], approval_id=approval_id)
        _record(state, events, call, envelope, duration_ms=int((deps.now() - started) * 1000), approval_id=approval_id,
                trusted=bool(snapshot["tools"][call["name"]].get("trusted", False)))
        if (taint := _read_untrusted(state, call, snapshot["tools"][call["name"]], envelope)) is not None:
            events.append(("tainted", taint))


def _record(state, events, call, envelope, *, duration_ms, approval_id, count=True, trusted=None) -> None:
    state["pending"].pop(0)
    if count:
        state["tool_calls"] += 1
    entry = {"name": call["name"], "ok": envelope["ok"], "code": envelope.get("code", ""),
             "duration_ms": duration_ms, "approval_id": approval_id}
    state["tool_log"].append(entry)
    extra = {} if trusted is None else {"source_trusted": trusted}  # the mark it was read under, in the signed trace
    events.append(("tool_call", entry | {"call_id": call["id"], "arguments": call["arguments"], "result": envelope}
                   | extra))
    state["messages"].append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                              "content": canonical(envelope)})


def _load_skill(state, events, snapshot, call) -> dict:
    name = call["arguments"].get("name") if isinstance(call["arguments"], dict) else None
    skill = next((s for s in snapshot.get("skills", []) if s["name"] == name), None)
    if skill is None:
        return error_envelope("not_found", f"there is no skill named {name!r}")
    _activate_skill(state, events, name, why={"loaded_by": "model"}, body=skill["body"])
    return {"ok": True, "data": {"name": name, "body": skill["body"]}}
