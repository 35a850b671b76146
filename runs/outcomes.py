"""What one step of the agent loop takes besides the state (its dependencies) and what it ends in."""

import time
from dataclasses import dataclass, field
from typing import Callable

from agents.backends.base import ModelRequest, ModelResponse
from runs.states import ErrorCode, RunStatus


@dataclass(frozen=True)
class Deps:
    complete: Callable[[ModelRequest], ModelResponse]
    execute: Callable[..., dict]  # (call, *, side_effect, approval_id) -> envelope
    granted_now: Callable[[], set[str]]
    now: Callable[[], float] = time.time
    # Kinds of secret found in a call's arguments (API keys, card numbers); see governance.redaction.
    leaks: Callable[[dict], list[str]] = lambda arguments: []
    # (call, the gate's NeedsApproval) -> the id of a live standing approval that answers the
    # call, its use counted (runs.standing), or None: ask people. Looked up at the call, so a
    # revocation mid-run bites. An eval's sandbox keeps this default and never uses one.
    standing: Callable[..., str | None] = lambda call, needed: None


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
    # The asking policy's quorum and escalation (governance.gate.NeedsApproval), for the request.
    quorum: int = 1
    escalate_to_role: str | None = None
    escalate_after_seconds: int | None = None


@dataclass(frozen=True)
class ParkBudget(Park):
    """A budget ran out and the agent names a budget role: the run waits (awaiting_budget) for one
    of its members to extend it. `budget`: the kind, what was used, the limit and what is asked
    (runs.budget). A Park, so it is saved and parked the way a call's park is."""

    budget: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Finish:
    status: RunStatus
    output: str = ""
    stop_reason: str = ""
    error: str = ""
    message: str = ""


@dataclass
class StepResult:
    state: dict  # the new state as stored: RunState.to_json()
    outcome: Continue | Park | Finish  # a ParkBudget is a Park
    events: list[tuple[str, dict]] = field(default_factory=list)


def unusable_twice(problem: str) -> Finish:
    """A model turn that could not be used, right after another: the run fails."""
    return Finish(RunStatus.FAILED, error=ErrorCode.INVALID_OUTPUT,
                  message=f"the model's reply was unusable twice in a row: {problem}")
