"""A run's budgets and their extensions. Pure: no ORM.

Four budgets end a run: tokens, tool calls, turns (model calls) and the deadline, each named by
its stop reason and set by a field of the agent. A run's limit is the agent's, as frozen, plus
the extensions granted to it (RunState.extensions). When one runs out and the agent names a
budget role, the run does not stop: it asks (a ParkBudget: the run waits in awaiting_budget, the
request goes to that role), and asks for the same amount again of the budget that ran out, or for
what the refused call needs when that is more. Approved, the run goes on with the extension;
denied or expired, it stops with the stop reason it would have stopped with.

A cost that can be known is checked before it is spent: the model call's estimate (the request
at about four characters a token, as the scripted backend counts it, plus the profile's max_tokens
for the reply) over the tokens left refuses the call before it is made, not after.
"""

import hashlib
import json

from agents.backends.base import ModelRequest, estimate_tokens
from agents.profile_options import DEFAULT_MAX_TOKENS
from runs.outcomes import Finish, ParkBudget
from runs.state import RunState
from runs.states import RunStatus, StopReason

# The budget (its stop reason) -> the agent's field that sets it.
FIELDS = {
    StopReason.TOKEN_BUDGET: "max_tokens",
    StopReason.TOOL_BUDGET: "max_tool_calls",
    StopReason.MAX_TURNS: "max_turns",
    StopReason.DEADLINE: "deadline_seconds",
}
# A budget ask's call id starts so: the gate's limit on a run's approval requests counts the
# requests its model's calls raised, not the harness's asks for budget (runs.tool_batch).
ASK_PREFIX = "budget:"
UNITS = {StopReason.TOKEN_BUDGET: "tokens", StopReason.TOOL_BUDGET: "tool calls", StopReason.MAX_TURNS: "turns",
         StopReason.DEADLINE: "seconds"}


def limit(state: RunState, agent: dict, kind: str) -> int:
    return agent[FIELDS[kind]] + state.extensions.get(kind, 0)


def used(state: RunState, agent: dict, kind: str) -> int:
    if kind == StopReason.TOKEN_BUDGET:
        return state.input_tokens + state.output_tokens
    if kind == StopReason.TOOL_BUDGET:
        return state.tool_calls
    if kind == StopReason.MAX_TURNS:
        return state.turns
    return limit(state, agent, kind)  # a deadline that passed: all of it


def deadline_of(state: RunState, deadline: float | None) -> float | None:
    """The run's deadline (its row's, moved on by the time it waited for people) plus the seconds granted."""
    return None if deadline is None else deadline + state.extensions.get(StopReason.DEADLINE, 0)


def spent(state: RunState, agent: dict, now: float, deadline: float | None) -> str | None:
    """The budget a step may not start on: its deadline passed or its tokens spent."""
    if (ends := deadline_of(state, deadline)) is not None and now >= ends:
        return StopReason.DEADLINE
    if used(state, agent, StopReason.TOKEN_BUDGET) >= limit(state, agent, StopReason.TOKEN_BUDGET):
        return StopReason.TOKEN_BUDGET
    return None


def estimate(request: ModelRequest, profile: dict) -> int:
    """What a model call may cost at most, in tokens: its request as the scripted backend counts
    it (an estimate; real backends tokenize differently) and the longest reply the profile allows."""
    sent = request.system + json.dumps(request.messages, ensure_ascii=False) + json.dumps(request.tools,
                                                                                        ensure_ascii=False)
    reply = profile.get("max_tokens")
    return estimate_tokens(sent) + (reply if isinstance(reply, int) and reply > 0 else DEFAULT_MAX_TOKENS)


def settle(state: RunState, events: list, decisions: dict) -> Finish | None:
    """Apply the decision on the run's budget ask, if one was taken: approved, the extension is
    the run's; denied or expired, the run stops as it would have without one."""
    ask = state.budget_ask
    if ask is None:
        return None
    decision = decisions.get(f"{ask['call_id']}:{ask['digest']}")
    if decision is None or decision["status"] == "pending":
        return None  # still waiting: the check that finds the budget spent parks again on this ask
    state.budget_ask = None
    kind = ask["kind"]
    seen = {"kind": kind, "approval_id": decision["id"], "decision": decision["status"]}
    if decision["status"] == "approved":
        state.extensions[kind] = state.extensions.get(kind, 0) + ask["asked"]
        events.append(("budget_extended", seen | {"asked": ask["asked"], "limit": ask["limit"] + ask["asked"]}))
        return None
    events.append(("budget_refused", seen | {"reason": decision.get("reason", "")}))
    return Finish(RunStatus.STOPPED, stop_reason=kind,
                  message=f"the {UNITS[kind]} extension asked for was {decision['status']}")


def run_out(state: RunState, agent: dict, kind: str, *, run_id: str, needed: int = 0,
            estimated: int | None = None) -> ParkBudget | Finish:
    """Budget `kind` is spent (or cannot pay for what comes next, `needed` more than is left): ask
    the agent's budget role for more, or stop. `estimated`: the refused model call's estimate."""
    role = agent.get("budget_role") or ""
    if not role:
        return Finish(RunStatus.STOPPED, stop_reason=kind)
    ask = state.budget_ask
    if ask is None or ask["kind"] != kind:
        state.budget_asks += 1
        state.parks += 1  # a run that parked has requests for its end to close (runs.lifecycle)
        asked = max(agent[FIELDS[kind]], needed)
        ask = {"call_id": f"{ASK_PREFIX}{kind}:{state.budget_asks}", "kind": kind, "step": state.turns, "asked": asked,
               "limit": limit(state, agent, kind), "used": used(state, agent, kind)}
        if estimated is not None:
            ask["estimated"] = estimated
        ask["digest"] = _digest(run_id, ask)
        state.budget_ask = ask
    budget = {name: ask[name] for name in ("kind", "used", "limit", "asked", "estimated") if name in ask}
    return ParkBudget(
        call_id=ask["call_id"], step=ask["step"], tool="", arguments=_arguments(ask), arguments_sha256=ask["digest"],
        approver_role=role, ttl_seconds=None, policy=None, rationale="", budget=budget,
        reasons=[f"the run used {ask['used']} of its {ask['limit']} {UNITS[kind]}; it asks for {ask['asked']} more"],
    )


def _arguments(ask: dict) -> dict:
    return {"kind": ask["kind"], "asked": ask["asked"]}


def _digest(run_id: str, ask: dict) -> str:
    """What the request is bound to, in the form of a call's digest (runs.tool_batch.call_digest):
    this run, this step, no tool, and the kind and amount asked as its arguments. The call id
    numbers the asks, so two equal asks are two requests."""
    body = [run_id, ask["step"], "", _arguments(ask)]
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
