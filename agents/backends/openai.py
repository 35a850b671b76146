"""OpenAI-compatible chat completions (`POST {base_url}/v1/chat/completions`) with tool calling.

Speaks the dialect Ollama, llama.cpp's server, vLLM, LM Studio and hosted APIs share: a system
message first, `tools` as functions, assistant `tool_calls` whose arguments are a JSON string,
and `tool` messages carrying each result. base_url is the server root; one that ends in `/v1`
(the form OpenAI's SDKs and Ollama's docs give) is taken as it is, not given a second `/v1`.
The profile's max_tokens, temperature and extra_body go in the body (agents.profile_options).
"""

import json

from agents.backends.base import (AttemptFailed, ModelOutputInvalid, ModelRequest, ModelResponse, ToolCall, Usage,
                                  estimate_tokens)
from agents.backends.transport import api_key, post_json
from agents.profile_options import apply

PATH = "/v1/chat/completions"


class OpenAIBackend:
    name = "openai"

    def __init__(self, profile: dict):
        self.profile = dict(profile)

    def complete(self, request: ModelRequest) -> ModelResponse:
        key = api_key(self.profile)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = apply(payload(request), self.profile)
        reply = post_json(self.profile, path(self.profile), body, headers=headers, secret=key)
        return parse(reply, request, backend=self.name)


def path(profile: dict) -> str:
    """Where the call goes under base_url: its /v1 is not repeated."""
    root = (profile.get("base_url") or "").rstrip("/")
    return PATH.removeprefix("/v1") if root.endswith("/v1") else PATH


def payload(request: ModelRequest) -> dict:
    messages = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        messages.append(_wire_message(message))
    body = {"model": request.model, "messages": messages, "stream": False}
    if request.tools:
        body["tools"] = [
            {"type": "function",
             "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
            for t in request.tools
        ]
        body["tool_choice"] = "auto"
    return body


def _wire_message(message: dict) -> dict:
    role = message["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}
    if role == "assistant":
        wire = {"role": "assistant", "content": message.get("content") or None}
        if message.get("tool_calls"):
            wire["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                for c in message["tool_calls"]
            ]
        return wire
    return {"role": "user", "content": message["content"]}


def parse(reply: dict, request: ModelRequest, *, backend: str) -> ModelResponse:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AttemptFailed("bad_reply", "the reply has no choices", retryable=True)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AttemptFailed("bad_reply", "the first choice has no message", retryable=True)
    text = message.get("content") or ""
    if not isinstance(text, str):
        raise AttemptFailed("bad_reply", "the message content is not text", retryable=True)
    usage = _usage(reply.get("usage"), request, text)
    model = str(reply.get("model") or request.model)
    try:
        calls = [_tool_call(raw, index) for index, raw in enumerate(message.get("tool_calls") or [], start=1)]
        if calls and choices[0].get("finish_reason") == "length":
            raise ValueError("the reply was cut off by the token limit in the middle of a tool call")
    except ValueError as exc:
        raise ModelOutputInvalid(str(exc), usage=usage, model=model, backend=backend) from None
    return ModelResponse(text=text, tool_calls=calls, usage=usage, model=model, backend=backend,
                         rationale=text if calls else "")


def _tool_call(raw, index: int) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise ValueError(f"tool call {index} has no function name")
    arguments = function.get("arguments")
    if arguments in (None, ""):
        arguments = {}
    elif isinstance(arguments, str):  # the standard form; some servers send the object itself
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise ValueError(f"the arguments of {function['name']} are not valid JSON") from None
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments of {function['name']} are not a JSON object")
    return ToolCall(id=str(raw.get("id") or f"call_{index}"), name=function["name"], arguments=arguments)


def _count(value) -> bool:
    """A token count: a whole number, not negative (a negative one would pay back the token budget)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage(raw, request: ModelRequest, text: str) -> Usage:
    if isinstance(raw, dict) and _count(raw.get("prompt_tokens")) and _count(raw.get("completion_tokens")):
        details = raw.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else 0
        return Usage(raw["prompt_tokens"], raw["completion_tokens"], cache_read_tokens=cached if _count(cached) else 0)
    # Some local servers omit usage: estimate, and say so.
    prompt = request.system + json.dumps(request.messages) + json.dumps(request.tools)
    return Usage(estimate_tokens(prompt), estimate_tokens(text), estimated=True)
