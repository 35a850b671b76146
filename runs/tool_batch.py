"""The tool-call half of a step: run the last model turn's calls in order, each through the gate.

A call the gate refuses gets an error envelope the model reads; one that needs a human parks the
run (or, decided, runs or is denied); one it allows runs. The batch ends when its calls are done,
the tool budget is spent, or a call parks. Run `read_only` (in the step of the model call that
asked for them, runs.harness), the batch also ends, with the rest left pending for a step of its
own, before the first call that has a side effect or that the gate refuses; a read-only call that
needs a human parks the run in that same step (the call was made just now: no one can have
decided it yet).
"""

import hashlib
import json

from agents.tools.envelopes import error as error_envelope
from governance.gate import NeedsApproval, Refused, RunFacts, gate
from governance.screening import screen, screen_known, screen_value
from governance.taint import UNTRUSTED
from runs import budget, context, provenance
from runs.outcomes import Continue, Deps, Finish, Park, ParkBudget, unusable_twice
from runs.state import RunState
from runs.states import StopReason

# Refusals that mean the model got the call itself wrong, not that it was not allowed.
MALFORMED_CALL = ("unknown_tool", "invalid_arguments")


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def call_digest(*, run_id: str, step: int, tool: str, arguments: dict) -> str:
    """What an approval is bound to: this run, this step, this tool, exactly these arguments."""
    return hashlib.sha256(canonical([run_id, step, tool, arguments]).encode()).hexdigest()


def decision_key(call_id: str, digest: str) -> str:
    """One approval covers one call: two identical calls in a batch are two requests."""
    return f"{call_id}:{digest}"


def run_tools(state: RunState, snapshot: dict, deps: Deps, events: list, *, run_id: str,
              decisions: dict, read_only: bool = False) -> Continue | Park | ParkBudget | Finish:
    tools = snapshot["tools"]
    while state.pending:
        call = state.pending[0]
        if call["name"] == context.LOAD_SKILL:
            _record(state, events, call, _load_skill(state, events, snapshot, call), count=False)
            continue
        if state.tool_calls >= budget.limit(state, snapshot["agent"], StopReason.TOOL_BUDGET):
            return budget.run_out(state, snapshot["agent"], StopReason.TOOL_BUDGET, run_id=run_id)
        if (capped := _over_cap(state, snapshot, call)) is not None:
            _refuse(state, events, call, capped)  # before the gate: no one is asked for a call over its cap
            continue
        if read_only and (call["name"] not in tools or tools[call["name"]]["side_effect"]):
            return Continue()
        digest = call_digest(run_id=run_id, step=call["step"], tool=call["name"], arguments=call["arguments"])
        decision = decisions.get(decision_key(call["id"], digest)) if decisions else None
        verdict = gate(call, snapshot, _facts(state, snapshot, deps, decisions, asked=decision is not None))
        if read_only and isinstance(verdict, Refused):
            return Continue()  # refused again, in the batch's own step
        if isinstance(verdict, Refused):
            if _refuse(state, events, call, verdict):
                return unusable_twice(verdict.reason)
            continue
        approval_id = standing_id = None
        if isinstance(verdict, NeedsApproval):
            if decision is None and (standing_id := _standing(state, call, verdict, deps)) is not None:
                events.append(("standing_approval_used", {"standing_approval_id": standing_id, "tool": call["name"],
                                                          "call_id": call["id"]}))
            elif decision is None or decision["status"] == "pending":
                return _park(state, snapshot, call, digest, verdict)
            elif decision["status"] != "approved":
                _deny(state, events, call, decision)
                continue
            else:
                approval_id = decision["id"]
        started = deps.now()
        envelope = deps.execute(call, side_effect=tools[call["name"]]["side_effect"], approval_id=approval_id)
        state.tool_uses[call["name"]] = state.tool_uses.get(call["name"], 0) + 1
        _record(state, events, call, envelope, duration_ms=int((deps.now() - started) * 1000),
                approval_id=approval_id, trusted=bool(tools[call["name"]].get("trusted", False)),
                standing_approval_id=standing_id, approval=_frozen_approval(tools[call["name"]]))
        if (taint := _read_untrusted(state, call, tools[call["name"]], envelope)) is not None:
            events.append(("tainted", taint))
    return Continue()


def _over_cap(state: RunState, snapshot: dict, call: dict) -> Refused | None:
    """The agent's cap on this tool's calls in a run ({"send_email": 1}), when it is reached.
    Counted are calls that ran; a refused or denied one did not."""
    cap = (snapshot["agent"].get("tool_caps") or {}).get(call["name"])
    if cap is None or state.tool_uses.get(call["name"], 0) < cap:
        return None
    return Refused(code="tool_cap", reason=f"{call['name']} may run at most {cap} time{'s' if cap != 1 else ''} "
                                           "in a run, and it has; it did not run")


def _facts(state: RunState, snapshot: dict, deps: Deps, decisions: dict, *, asked: bool) -> RunFacts:
    return RunFacts(
        input_text=state.input_text, policies=context.policies(snapshot), tainted=state.tainted,
        taint_reasons=state.taint_reasons, active_skills=state.active_skills, granted_now=deps.granted_now,
        approval_requests=sum(1 for key in decisions if not key.startswith(budget.ASK_PREFIX)), asked=asked,
        leaks=deps.leaks, spoofed=provenance.flags,
    )


def _standing(state: RunState, call: dict, needed: NeedsApproval, deps: Deps) -> str | None:
    """A standing approval answers only a policy's question asked of one person, and never in a
    tainted run or for arguments carrying a secret or a look-alike address: those reasons hold
    whatever anyone said in advance (runs.standing has the rest of the rules)."""
    if state.tainted or needed.policy is None or getattr(needed, "quorum", 1) != 1:
        return None
    if deps.leaks(call["arguments"]) or provenance.flags(call["arguments"]):
        return None
    return deps.standing(call, needed)


def _refuse(state: RunState, events: list, call: dict, refused: Refused) -> bool:
    """Answer a refused call with its error envelope. True when the run fails: a malformed call
    in the turn right after another unusable one."""
    details = {"path": refused.path} if refused.path is not None else {}
    envelope = error_envelope(refused.code, refused.reason, **details)
    events.append(("tool_refused", {"call_id": call["id"], "tool": call["name"], "code": refused.code,
                                    "reason": refused.reason}))
    _record(state, events, call, envelope)
    # A refused call needs no reminder: its error envelope is the model's feedback.
    return refused.code in MALFORMED_CALL and state.malformed_turn != call["step"] and state.malformed(call["step"])


def _park(state: RunState, snapshot: dict, call: dict, digest: str, needed: NeedsApproval) -> Park:
    if needed.policy:
        state.fired.append(needed.policy)
    state.parks += 1
    # Kept in the state as read (the trace is redacted): the approver's card shows it.
    found = provenance.arguments_provenance(call["arguments"], provenance.untrusted_texts(state.to_json(), snapshot))
    state.provenance[call["id"]] = found
    return Park(call_id=call["id"], step=call["step"], tool=call["name"], arguments=call["arguments"],
                arguments_sha256=digest, approver_role=needed.approver_role, ttl_seconds=needed.ttl_seconds,
                policy=needed.policy, reasons=needed.reasons, rationale=state.rationale, provenance=found,
                quorum=needed.quorum, escalate_to_role=needed.escalate_to_role,
                escalate_after_seconds=needed.escalate_after_seconds)


def _deny(state: RunState, events: list, call: dict, decision: dict) -> None:
    # An expired request counts as denied (the code says so); `decision` says which it was.
    envelope = error_envelope("denied", f"the call to {call['name']} was {decision['status']}; it did not run",
                              decision=decision["status"], reason=decision.get("reason", ""), approval_id=decision["id"])
    _record(state, events, call, envelope, approval_id=decision["id"])
    # The approver's words reach the model: they are screened like any other text.
    if taint := state.taint("approval comment", screen(decision.get("reason", ""), data=True)):
        events.append(("tainted", taint))


def _read_untrusted(state: RunState, call: dict, tool: dict, envelope: dict) -> dict | None:
    """Taint by provenance: what an untrusted tool said taints the run, whatever its words; the
    screen's findings say what else it looked like. A trusted tool taints only when screened."""
    found = screen_value(envelope, data=True)
    # A snapshot frozen before trust marks existed has no "trusted": untrusted, so it fails closed.
    if not tool.get("trusted", False):
        state.untrusted_calls.append(call["id"])
        found = [UNTRUSTED] + found
    return state.taint(f"result of {call['name']}", found)


def _frozen_approval(tool: dict) -> dict | None:
    """The approval the run's frozen snapshot gave the tool, by role name, for the signed trace: an
    offline verifier compares it across runs with the sealed approval changes (warrant_verify.approvals).
    None for a snapshot frozen before tools carried it."""
    if "requires_approval" not in tool:
        return None
    return {"requires_approval": bool(tool["requires_approval"]), "approver_role": tool.get("approver_role") or None}


def _record(state: RunState, events: list, call: dict, envelope: dict, *, duration_ms: int = 0,
            approval_id: str | None = None, count: bool = True, trusted: bool | None = None,
            standing_approval_id: str | None = None, approval: dict | None = None) -> None:
    state.pending.pop(0)
    if count:
        state.tool_calls += 1
    entry = {"name": call["name"], "ok": envelope["ok"], "code": envelope.get("code", ""),
             "duration_ms": duration_ms, "approval_id": approval_id}
    if standing_approval_id:  # only then: the entries of calls without one keep their shape
        entry["standing_approval_id"] = standing_approval_id
    state.tool_log.append(entry)
    extra = {} if trusted is None else {"source_trusted": trusted}  # the mark it was read under, in the signed trace
    if approval is not None:  # and the approval it ran under
        extra["approval"] = approval
    events.append(("tool_call", entry | {"call_id": call["id"], "arguments": call["arguments"], "result": envelope}
                   | extra))
    state.messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                           "content": canonical(envelope)})


def activate_skill(state: RunState, events: list, name: str, *, why: dict, body: str = "") -> None:
    if name not in state.active_skills:
        state.active_skills.append(name)
        events.append(("skill_activated", {"skill": name} | why))
        # Skills are imported text: their steps name tools (normal), but overrides, role changes
        # or hidden text in a body are injected instructions like any other.
        if (taint := state.taint(f"skill {name}", screen_known(body))) is not None:
            events.append(("tainted", taint))


def _load_skill(state: RunState, events: list, snapshot: dict, call: dict) -> dict:
    name = call["arguments"].get("name") if isinstance(call["arguments"], dict) else None
    skill = next((s for s in snapshot.get("skills", []) if s["name"] == name), None)
    if skill is None:
        return error_envelope("not_found", f"there is no skill named {name!r}")
    activate_skill(state, events, name, why={"loaded_by": "model"}, body=skill["body"])
    return {"ok": True, "data": {"name": name, "body": skill["body"]}}
