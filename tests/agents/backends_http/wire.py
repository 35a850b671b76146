"""Each protocol's replies, and the scripted model standing behind each protocol.

The "model" a demo run talks to is a loopback server that reads the wire request the way a real
server would, hands what it understood to the scripted backend, and answers in the wire format.
If Warrant's translation lost anything (a tool result, a call id, the system prompt), the
scripted model would decide differently and the demo assertions would fail.
"""

import json

from agents.backends.base import ModelRequest
from agents.backends.scripted import ScriptedBackend
from tests.agents.backends_http.server import Reply, Seen


def openai_reply(text: str = "", calls=(), *, prompt: int = 11, completion: int = 7, cached: int = 0,
                 model: str = "served-model", finish: str | None = None) -> dict:
    message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for cid, name, args in calls
        ]
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def anthropic_reply(text: str = "", calls=(), *, input_tokens: int = 11, output_tokens: int = 7, cache_read: int = 0,
                    cache_creation: int = 0, model: str = "served-claude", stop_reason: str | None = None) -> dict:
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls
    ]
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"), "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_creation},
    }


def openai_understood(body: dict) -> ModelRequest:
    system, messages = "", []
    for m in body["messages"]:
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "assistant":
            messages.append({"role": "assistant", "content": m.get("content") or "", "tool_calls": [
                {"id": c["id"], "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                for c in m.get("tool_calls") or []]})
        elif m["role"] == "tool":
            messages.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            messages.append({"role": "user", "content": m["content"]})
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in body.get("tools", [])]
    return ModelRequest(system=system, messages=messages, tools=tools, model=body["model"])


def anthropic_understood(body: dict) -> ModelRequest:
    system = "".join(block["text"] for block in body.get("system", []))
    messages = []
    for m in body["messages"]:
        texts = [b["text"] for b in m["content"] if b["type"] == "text"]
        if m["role"] == "assistant":
            messages.append({"role": "assistant", "content": "".join(texts), "tool_calls": [
                {"id": b["id"], "name": b["name"], "arguments": b["input"]}
                for b in m["content"] if b["type"] == "tool_use"]})
            continue
        for block in m["content"]:
            if block["type"] == "tool_result":
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": block["content"]})
        if texts:
            messages.append({"role": "user", "content": "".join(texts)})
    tools = [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
             for t in body.get("tools", [])]
    return ModelRequest(system=system, messages=messages, tools=tools, model=body["model"])


def scripted_openai(seen: Seen) -> Reply:
    assert seen.path == "/v1/chat/completions", seen.path
    answer = ScriptedBackend().complete(openai_understood(seen.json))
    return Reply(json=openai_reply(answer.text, [(c.id, c.name, c.arguments) for c in answer.tool_calls],
                                   prompt=answer.usage.input_tokens, completion=answer.usage.output_tokens))


def scripted_anthropic(seen: Seen) -> Reply:
    assert seen.path == "/v1/messages", seen.path
    answer = ScriptedBackend().complete(anthropic_understood(seen.json))
    return Reply(json=anthropic_reply(answer.text, [(c.id, c.name, c.arguments) for c in answer.tool_calls],
                                      input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
                                      cache_read=40))
