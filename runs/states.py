"""Run statuses, stop reasons, error codes and the transitions allowed between them. Pure."""

from enum import StrEnum


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_BUDGET = "awaiting_budget"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"
    STOPPED = "stopped"
    CANCELLED = "cancelled"


class StopReason(StrEnum):
    TOKEN_BUDGET = "token_budget"
    TOOL_BUDGET = "tool_budget"
    MAX_TURNS = "max_turns"
    DEADLINE = "deadline"


class ErrorCode(StrEnum):
    MODEL_UNAVAILABLE = "model_unavailable"
    INVALID_OUTPUT = "invalid_output"
    POLICY_ERROR = "policy_error"
    INTERNAL = "internal"


TERMINAL = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.STOPPED, RunStatus.CANCELLED}
)

ALLOWED = {
    RunStatus.QUEUED: {RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED},
    RunStatus.RUNNING: {RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_BUDGET, RunStatus.QUEUED} | TERMINAL,
    RunStatus.AWAITING_APPROVAL: {RunStatus.QUEUED, RunStatus.CANCELLED, RunStatus.FAILED},
    RunStatus.AWAITING_BUDGET: {RunStatus.QUEUED, RunStatus.CANCELLED, RunStatus.FAILED},
}


class IllegalTransition(Exception):
    pass


def check_transition(current: str, new: str) -> None:
    if new not in ALLOWED.get(RunStatus(current), set()):
        raise IllegalTransition(f"a run cannot go from {current} to {new}")
