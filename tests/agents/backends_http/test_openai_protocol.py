"""The OpenAI-compatible backend against a loopback server speaking chat completions."""

import json

import pytest

from agents.backends.base import AttemptFailed, ModelOutputInvalid, ModelRequest
from agents.backends.openai import OpenAIBackend
from tests.agents.backends_http.server import Reply, profile_spec
from tests.agents.backends_http.wire import openai_reply

SCHEMA = {"type": "object", "properties": {"account_id": {"type": "string"}}, "required": ["account_id"]}
REQUEST = ModelRequest(
    system="You are the CRM assistant.",
    messages=[
        {"role": "user", "content": "How healthy is Acme Corp?"},
        {"role": "assistant", "content": "Looking it up.", "tool_calls": [
            {"id": "call_1_1", "name": "get_account", "arguments": {"query": "Acme Corp"}}]},
        {"role": "tool", "tool_call_id": "call_1_1", "name": "get_account",
         "content": '{"data":{"account_id":"A-100"},"ok":true}'},
    ],
    tools=[{"name": "compute_health_score", "description": "Score an account.", "input_schema": SCHEMA}],
    model="ignored-by-the-backend",
)


def test_it_sends_a_chat_completion_with_system_history_and_tools(model_server, monkeypatch):
    monkeypatch.setenv("TEST_MODEL_KEY", "sk-test-123")
    model_server.script(Reply(json=openai_reply("Acme is healthy.")))
    OpenAIBackend(profile_spec(model_server, api_key_env="TEST_MODEL_KEY", model="llama3.1:8b")).complete(
        REQUEST.__class__(**{**REQUEST.__dict__, "model": "llama3.1:8b"}))
    seen = model_server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test-123"
    body = seen.json
    assert body["model"] == "llama3.1:8b" and body["stream"] is False and body["tool_choice"] == "auto"
    assert body["messages"][0] == {"role": "system", "content": "You are the CRM assistant."}
    assert body["messages"][1] == {"role": "user", "content": "How healthy is Acme Corp?"}
    assistant = body["messages"][2]
    assert assistant["tool_calls"] == [{"id": "call_1_1", "type": "function", "function": {
        "name": "get_account", "arguments": json.dumps({"query": "Acme Corp"})}}]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1_1",
                                   "content": '{"data":{"account_id":"A-100"},"ok":true}'}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "compute_health_score", "description": "Score an account.", "parameters": SCHEMA}}]


def test_it_reads_tool_calls_usage_and_the_served_model(model_server):
    model_server.script(Reply(json=openai_reply("Scoring.", [("call_abc", "compute_health_score",
                                                               {"account_id": "A-100"})],
                                                prompt=120, completion=9, cached=100, model="llama3.1:8b-q4")))
    response = OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("compute_health_score", {"account_id": "A-100"})]
    assert response.usage.input_tokens == 120 and response.usage.output_tokens == 9
    assert response.usage.cache_read_tokens == 100 and not response.usage.estimated
    assert response.model == "llama3.1:8b-q4" and response.backend == "openai"


def test_it_sends_no_authorization_header_for_a_keyless_local_server(model_server):
    model_server.script(Reply(json=openai_reply("ok")))
    OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert "authorization" not in model_server.requests[0].headers


def test_arguments_sent_as_an_object_are_accepted_and_missing_usage_is_estimated(model_server):
    reply = openai_reply("", [("c1", "compute_health_score", "{}")])
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"account_id": "A-200"}
    del reply["usage"]
    model_server.script(Reply(json=reply))
    response = OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert response.tool_calls[0].arguments == {"account_id": "A-200"}
    assert response.usage.estimated and response.usage.input_tokens > 0


@pytest.mark.parametrize("arguments, problem", [
    ('{"account_id": "A-1"', "not valid JSON"),
    ('["A-1"]', "not a JSON object"),
])
def test_unusable_tool_arguments_are_invalid_output_not_a_call(model_server, arguments, problem):
    model_server.script(Reply(json=openai_reply("", [("c1", "compute_health_score", arguments)])))
    with pytest.raises(ModelOutputInvalid) as caught:
        OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert problem in caught.value.problem and caught.value.usage.input_tokens == 11


def test_a_tool_call_cut_off_by_the_token_limit_is_invalid_output(model_server):
    model_server.script(Reply(json=openai_reply("", [("c1", "compute_health_score", {"account_id": "A-1"})],
                                                finish="length")))
    with pytest.raises(ModelOutputInvalid, match="token limit"):
        OpenAIBackend(profile_spec(model_server)).complete(REQUEST)


@pytest.mark.parametrize("reply, kind", [
    (Reply(body=b'{"choices": [ {"message": '), "bad_reply"),
    (Reply(body=b"<html>502 Bad Gateway</html>"), "bad_reply"),
    (Reply(json={"object": "chat.completion", "choices": []}), "bad_reply"),
    (Reply(json=openai_reply("hello"), cut_after=40), "bad_reply"),
    (Reply(json={"error": {"message": "model 'nope' not found"}}, status=404), "client_error"),
    (Reply(json={"error": {"message": "overloaded"}}, status=503), "server_error"),
])
def test_garbage_and_errors_are_typed_failures(model_server, reply, kind):
    model_server.script(reply)
    with pytest.raises(AttemptFailed) as caught:
        OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert caught.value.kind == kind, str(caught.value)
    assert caught.value.retryable is (kind != "client_error")


@pytest.mark.parametrize("declared", [True, False])
def test_a_one_megabyte_reply_is_refused_before_it_is_parsed(model_server, declared):
    huge = openai_reply("x" * 1_000_000, [("c1", "compute_health_score", {"account_id": "A-1"})])
    model_server.script(Reply(json=huge, no_length=not declared))
    with pytest.raises(AttemptFailed, match="larger than") as caught:
        OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert caught.value.kind == "bad_reply"


def test_a_server_that_hangs_times_out_at_the_read_timeout(model_server):
    model_server.script(Reply(json=openai_reply("late"), delay=3))
    with pytest.raises(AttemptFailed) as caught:
        OpenAIBackend(profile_spec(model_server, read_timeout=0.3)).complete(REQUEST)
    assert caught.value.kind == "timeout" and caught.value.retryable


def test_a_missing_key_variable_is_a_config_error_that_names_the_variable_only(model_server, monkeypatch):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    with pytest.raises(AttemptFailed, match="NOT_SET_KEY") as caught:
        OpenAIBackend(profile_spec(model_server, api_key_env="NOT_SET_KEY")).complete(REQUEST)
    assert caught.value.kind == "config" and not caught.value.retryable
    assert model_server.requests == []


def test_a_key_the_server_echoes_in_its_error_is_redacted(model_server, monkeypatch):
    monkeypatch.setenv("TEST_MODEL_KEY", "sk-live-secret-999")
    model_server.script(lambda seen: Reply(401, {"error": {"message": f"Incorrect API key provided: "
                                                                      f"{seen.headers['authorization'][7:]}"}}))
    with pytest.raises(AttemptFailed) as caught:
        OpenAIBackend(profile_spec(model_server, api_key_env="TEST_MODEL_KEY")).complete(REQUEST)
    assert "sk-live-secret-999" not in str(caught.value) and "***" in str(caught.value)
    assert caught.value.kind == "client_error" and caught.value.status == 401


def test_a_host_outside_the_allowed_list_is_never_contacted(model_server, settings):
    settings.WARRANT = settings.WARRANT | {"MODEL_ALLOWED_HOSTS": ("llm.internal",)}
    model_server.script(Reply(json=openai_reply("should not be asked")))
    with pytest.raises(AttemptFailed) as failure:
        OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert failure.value.kind == "config" and "WARRANT_MODEL_ALLOWED_HOSTS" in str(failure.value)
    assert "127.0.0.1" not in str(failure.value)  # it reaches /readyz, which shows no URLs
    assert model_server.requests == []
    settings.WARRANT = settings.WARRANT | {"MODEL_ALLOWED_HOSTS": ("127.0.0.1",)}
    OpenAIBackend(profile_spec(model_server)).complete(REQUEST)
    assert len(model_server.requests) == 1
