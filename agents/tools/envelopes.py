"""Tools never raise into the loop: every call ends as an envelope the model can read."""

from dataclasses import dataclass


class ToolError(Exception):
    """An expected failure a tool reports, e.g. ToolError("not_found", "no account 'X'")."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolContext:
    run_id: str
    caller: str
    idempotency_key: str = ""


def ok(data) -> dict:
    return {"ok": True, "data": data}


def error(code: str, message: str, **details) -> dict:
    envelope = {"ok": False, "code": code, "error": message}
    if details:
        envelope["details"] = details
    return envelope
