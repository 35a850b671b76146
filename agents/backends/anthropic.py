"""Anthropic Messages (`POST {base_url}/v1/messages`): tool_use and tool_result blocks.

Warrant's "tool" messages become tool_result blocks in a user turn (consecutive ones merged,
since the API wants user and assistant turns to alternate). The system prompt and the tool list
are marked for prompt caching: context puts the stable parts first, so later turns read them
from the cache, and usage reports the cache reads and writes.
"""

import json

from agents.backends.base import AttemptFailed, ModelOutputInvalid, ModelRequest, ModelResponse, ToolCall, Usage
from agents.backends.transport import api_key, post_json
from agents.profile_options import apply

PATH = "/v1/messages"
API_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}


class AnthropicBackend:
    name = "anthropic"

    def __init__(self, profile: dict):
        self.profile = dict(profile)

    def complete(self, request: ModelRequest) -> ModelResponse:
        key = api_key(self.profile)
        headers = {"anthropic-version": API_VERSION} | ({"x-api-key": key} if key else {})
        # The profile's max_tokens (4096 when empty), temperature and extra_body (agents.profile_options).
        reply = post_json(self.profile, PATH, apply(payload(request), self.profile), headers=headers, secret=key)
        return parse(reply, request, backend=self.name)


def payload(request: ModelRequest) -> dict:
    body = {"model": request.model, "messages": wire_messages(request.messages)}
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": CACHE}]
    if request.tools:
        tools = [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                 for t in request.tools]
        tools[-1]["cache_control"] = CACHE
        body["tools"] = tools
    return body


def wire_messages(messages: list[dict]) -> list[dict]:
    wire: list[dict] = []
    for message in messages:
        role, blocks = _blocks(message)
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for turn in wire:
        if not turn["content"]:
            turn["content"] = [{"type": "text", "text": "(no text)"}]  # the API refuses empty turns
    return wire


def _blocks(message: dict) -> tuple[str, list[dict]]:
    role = message["role"]
    if role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                         "content": message["content"], "is_error": not _envelope_ok(message["content"])}]
    text = message.get("content") or ""
    blocks = [{"type": "text", "text": text}] if text else []
    if role == "assistant":
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                   for c in message.get("tool_calls") or []]
        return "assistant", blocks
    return "user", blocks


def _envelope_ok(content: str) -> bool:
    try:
        return bool(json.loads(content).get("ok"))
    except (ValueError, AttributeError):
        return True


def parse(reply: dict, request: ModelRequest, *, backend: str) -> ModelResponse:
    content = reply.get("content")
    if reply.get("type") == "error" or not isinstance(content, list):
        raise AttemptFailed("bad_reply", "the reply has no content blocks", retryable=True)
    usage = _usage(reply.get("usage"))
    if usage is None:
        raise AttemptFailed("bad_reply", "the reply has no usage", retryable=True)
    model = str(reply.get("model") or request.model)
    texts, calls = [], []
    try:
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                calls.append(_tool_call(block, len(calls) + 1))
        if calls and reply.get("stop_reason") == "max_tokens":
            raise ValueError("the reply was cut off by the token limit in the middle of a tool call")
    except ValueError as exc:
        raise ModelOutputInvalid(str(exc), usage=usage, model=model, backend=backend) from None
    text = "".join(texts)
    return ModelResponse(text=text, tool_calls=calls, usage=usage, model=model, backend=backend,
                         rationale=text if calls else "", raw={"stop_reason": reply.get("stop_reason")})


def _tool_call(block: dict, index: int) -> ToolCall:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool_use block {index} has no name")
    arguments = block.get("input")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ValueError(f"the input of {name} is not a JSON object")
    return ToolCall(id=str(block.get("id") or f"toolu_{index}"), name=name, arguments=arguments)


def _usage(raw) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    counts = {k: raw.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                            "cache_creation_input_tokens")}
    if not all(isinstance(v, int) and v >= 0 for v in counts.values()):
        return None
    # The API's input_tokens excludes cached tokens; Warrant's counts every prompt token.
    total_input = counts["input_tokens"] + counts["cache_read_input_tokens"] + counts["cache_creation_input_tokens"]
    return Usage(total_input, counts["output_tokens"], cache_read_tokens=counts["cache_read_input_tokens"],
                 cache_creation_tokens=counts["cache_creation_input_tokens"])
