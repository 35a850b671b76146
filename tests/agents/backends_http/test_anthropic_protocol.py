"""The Anthropic Messages backend against a loopback server speaking /v1/messages."""

import pytest

from agents.backends.anthropic import AnthropicBackend
from agents.backends.base import AttemptFailed, ModelOutputInvalid, ModelRequest
from tests.agents.backends_http.server import Reply, profile_spec
from tests.agents.backends_http.wire import anthropic_reply

SCHEMA = {"type": "object", "properties": {"account_id": {"type": "string"}}, "required": ["account_id"]}
REQUEST = ModelRequest(
    system="You are the CRM assistant.",
    messages=[
        {"role": "user", "content": "How healthy is Acme Corp?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1_1", "name": "get_account", "arguments": {"query": "Acme Corp"}},
            {"id": "call_1_2", "name": "get_account", "arguments": {"query": "Nope Inc"}}]},
        {"role": "tool", "tool_call_id": "call_1_1", "name": "get_account", "content": '{"data":{"id":"A-100"},"ok":true}'},
        {"role": "tool", "tool_call_id": "call_1_2", "name": "get_account",
         "content": '{"code":"not_found","error":"no such account","ok":false}'},
        {"role": "user", "content": "Your answer does not meet the output contract."},
    ],
    tools=[{"name": "compute_health_score", "description": "Score an account.", "input_schema": SCHEMA},
           {"name": "get_account", "description": "Find an account.", "input_schema": {"type": "object"}}],
    model="claude-test",
)


def _backend(server, **extra):
    return AnthropicBackend(profile_spec(server, "anthropic", **extra))


def test_it_sends_messages_with_headers_blocks_and_cache_marks(model_server, monkeypatch):
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-test")
    model_server.script(Reply(json=anthropic_reply("Acme is healthy.")))
    _backend(model_server, api_key_env="TEST_ANTHROPIC_KEY").complete(REQUEST)
    seen = model_server.requests[0]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-ant-test" and seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    body = seen.json
    assert body["model"] == "claude-test" and body["max_tokens"] > 0
    assert body["system"] == [{"type": "text", "text": "You are the CRM assistant.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][0] == {"name": "compute_health_score", "description": "Score an account.", "input_schema": SCHEMA}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    # user / assistant alternate: both results and the reminder share one user turn, results first.
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1_1", "name": "get_account", "input": {"query": "Acme Corp"}},
        {"type": "tool_use", "id": "call_1_2", "name": "get_account", "input": {"query": "Nope Inc"}},
    ]
    results = body["messages"][2]["content"]
    assert [(b["type"], b.get("tool_use_id"), b.get("is_error")) for b in results] == [
        ("tool_result", "call_1_1", False), ("tool_result", "call_1_2", True), ("text", None, None)]


def test_it_reads_tool_use_stop_reason_and_cache_usage(model_server):
    model_server.script(Reply(json=anthropic_reply("Scoring.", [("toolu_1", "compute_health_score", {"account_id": "A-1"})],
                                                   input_tokens=20, output_tokens=15, cache_read=900,
                                                   cache_creation=100, model="claude-served")))
    response = _backend(model_server).complete(REQUEST)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_1", "compute_health_score", {"account_id": "A-1"})]
    assert response.text == "Scoring." and response.raw["stop_reason"] == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1020, 15)
    assert (response.usage.cache_read_tokens, response.usage.cache_creation_tokens) == (900, 100)
    assert response.model == "claude-served" and response.backend == "anthropic"


def test_a_tool_use_cut_off_at_max_tokens_is_invalid_output(model_server):
    model_server.script(Reply(json=anthropic_reply("", [("t1", "compute_health_score", {})], stop_reason="max_tokens")))
    with pytest.raises(ModelOutputInvalid, match="token limit"):
        _backend(model_server).complete(REQUEST)


def test_a_tool_use_whose_input_is_not_an_object_is_invalid_output(model_server):
    reply = anthropic_reply("", [("t1", "compute_health_score", {})])
    reply["content"][0]["input"] = "account A-1"
    model_server.script(Reply(json=reply))
    with pytest.raises(ModelOutputInvalid, match="not a JSON object"):
        _backend(model_server).complete(REQUEST)


@pytest.mark.parametrize("reply, kind, retryable", [
    (Reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), "server_error", True),
    (Reply(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
           headers={"retry-after": "7"}), "rate_limited", True),
    (Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}), "client_error", False),
    (Reply(json={"type": "message", "content": "not blocks"}), "bad_reply", True),
    (Reply(json=anthropic_reply("hi"), cut_after=25), "bad_reply", True),
])
def test_errors_and_garbage_are_typed_failures(model_server, reply, kind, retryable):
    model_server.script(reply)
    with pytest.raises(AttemptFailed) as caught:
        _backend(model_server).complete(REQUEST)
    assert (caught.value.kind, caught.value.retryable) == (kind, retryable)
    if kind == "rate_limited":
        assert caught.value.retry_after == 7
