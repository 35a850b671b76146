"""The contract between the harness and a model backend.

Messages are Warrant's own format; a backend translates them to and from its wire format and
nowhere else does. Roles: "user", "assistant" (text and/or tool_calls) and "tool" (the JSON
envelope of one call's result, with `tool_call_id` and `name`). A tool message's content is
fenced as untrusted data (`<tool_result name=… trust="untrusted-data">JSON</tool_result>`, with
every "<" inside the JSON escaped so the data cannot close the fence); `tool_result_payload`
gives the JSON back to a backend that wants to read it.

A backend's `complete` makes ONE attempt. Retries, the circuit breaker and fallbacks live in
agents.routing, which wraps any backend and hands every attempt back on the response (or on
the exception) so the run can record each one.
"""

import re
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict


@dataclass(frozen=True)
class Usage:
    """input_tokens counts every prompt token, cached ones included; the cache figures are parts of it."""

    input_tokens: int
    output_tokens: int
    estimated: bool = False
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: list[dict]
    tools: list[dict]  # [{"name", "description", "input_schema"}]
    model: str


@dataclass(frozen=True)
class ModelResponse:
    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    model: str
    backend: str
    rationale: str = ""
    raw: dict = field(default_factory=dict)
    profile: str = ""  # the profile that answered: not the requested one after a fallback
    attempts: tuple[dict, ...] = ()  # every attempt it took, as trace events (agents.routing)


class ModelUnavailable(Exception):
    """No profile in the chain produced a reply (network, server, quota, open breakers)."""

    def __init__(self, message: str, *, attempts: tuple[dict, ...] = ()):
        super().__init__(message)
        self.attempts = attempts


class AttemptFailed(Exception):
    """One attempt failed. `kind` names why; `retryable` says whether trying again may help.

    kinds: timeout, connection, rate_limited, server_error, client_error, bad_reply, config.
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.status, self.retryable, self.retry_after = kind, status, retryable, retry_after


class ModelOutputInvalid(Exception):
    """The server answered, but the model's reply cannot be used safely (e.g. tool arguments that
    are not a JSON object, a tool call cut off by the token limit). Nothing in it is executed."""

    def __init__(self, problem: str, *, usage: Usage, model: str, backend: str, profile: str = "",
                 attempts: tuple[dict, ...] = ()):
        super().__init__(problem)
        self.problem, self.usage, self.model, self.backend = problem, usage, model, backend
        self.profile, self.attempts = profile, attempts


class Backend(Protocol):
    name: str

    def complete(self, request: ModelRequest) -> ModelResponse: ...


def estimate_tokens(text: str) -> int:
    """About four characters a token: an estimate, and every caller says so."""
    return max(1, (len(text) + 3) // 4) if text else 0


_FENCE = re.compile(r"\A<tool_result\b[^>\n]*>\n(.*)\n</tool_result>\Z", re.S)


def tool_result_payload(content):
    """The JSON text inside a fenced tool result; anything else is returned unchanged."""
    if isinstance(content, str):
        match = _FENCE.match(content)
        if match:
            return match.group(1)
    return content
