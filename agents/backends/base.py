"""The contract between the harness and a model backend.

Messages are Warrant's own format; a backend translates them to and from its wire format and
nowhere else does. Roles: "user", "assistant" (text and/or tool_calls) and "tool" (the JSON
envelope of one call's result, with `tool_call_id` and `name`). A tool message's content is
fenced as untrusted data (`<tool_result name=… trust="untrusted-data">JSON</tool_result>`, with
every "<" inside the JSON escaped so the data cannot close the fence); `tool_result_payload`
gives the JSON back to a backend that wants to read it.
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
    input_tokens: int
    output_tokens: int
    estimated: bool = False


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


class ModelUnavailable(Exception):
    """The backend could not produce a reply (network, server, quota). Retried by the caller."""


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
