"""Garbage from a model server never executes a tool; the run fails closed, with its receipt.

A garbled or oversized reply is an unavailable server (asked again once, then the next fallback,
then `model_unavailable`). A well-formed reply that asks for something unusable (arguments that
are not JSON, an unknown tool, arguments against the schema) gets the model one repair turn;
a second unusable turn in a row fails the run `invalid_output`.
"""

import json

import pytest

from agents.backends.base import tool_result_payload

from agents.models import CrmAccount, ModelProfileHealth
from runs.models import Receipt, RunEvent
from tests.agents.backends_http.flows import ask, kinds, receipt_body, use_profile
from tests.agents.backends_http.server import Reply
from tests.agents.backends_http.wire import anthropic_reply, openai_reply

pytestmark = pytest.mark.django_db

DELETE = ("call_x", "delete_account", {"account_id": "A-300"})


@pytest.fixture
def openai_profile(model_server, demo, fast_retries):
    return use_profile("openai-local", backend="openai", base_url=model_server.url, max_retries=2)


def _nothing_ran(run) -> None:
    assert [e for e in kinds(run, "tool_call") if e["result"]["ok"]] == []
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    assert Receipt.objects.filter(run=run).exists()


@pytest.mark.parametrize("garbage", [
    Reply(body=b'{"choices": [{"message": {"tool_calls": [{"function": {"name": "delete_account"'),
    Reply(json=openai_reply("", [DELETE]), cut_after=60),
    Reply(json=openai_reply("x" * 1_000_000, [DELETE])),
    Reply(json=openai_reply("x" * 1_000_000, [DELETE]), no_length=True),
], ids=["invalid-json", "truncated", "one-megabyte", "one-megabyte-undeclared"])
def test_garbage_is_asked_again_once_then_the_run_fails_model_unavailable(openai_profile, model_server, garbage):
    model_server.default = lambda seen: garbage
    run = ask("Delete the account Initech.")
    assert (run.status, run.error) == ("failed", "model_unavailable")
    assert len(model_server.requests) == 2
    assert [a["kind"] for a in kinds(run, "model_attempt")] == ["bad_reply", "bad_reply"]
    _nothing_ran(run)
    body = receipt_body(run)
    assert body["error"] == "model_unavailable"
    assert body["model_calls"][0]["outcome"] == "unavailable" and body["model_calls"][0]["actual_model"] is None


def test_arguments_that_are_not_json_get_one_repair_turn(openai_profile, model_server):
    model_server.script(Reply(json=openai_reply("", [("c1", "list_accounts", '{"oops": ')])),
                        Reply(json=openai_reply("Four accounts: Acme Corp, Globex, Initech, Umbrella.")))
    run = ask("List all accounts.")
    assert run.status == "succeeded"
    reminder = model_server.requests[1].json["messages"][-1]
    assert reminder["role"] == "user" and "could not be used" in reminder["content"]
    assert kinds(run, "model_output_invalid")[0]["problem"] == "the arguments of list_accounts are not valid JSON"
    assert [c["outcome"] for c in receipt_body(run)["model_calls"]] == ["invalid_output", "ok"]


def test_unusable_output_twice_in_a_row_fails_the_run_invalid_output(openai_profile, model_server):
    model_server.default = lambda seen: Reply(json=openai_reply("", [("c1", "delete_account", "not json")]))
    run = ask("Delete the account Initech.")
    assert (run.status, run.error) == ("failed", "invalid_output")
    assert len(model_server.requests) == 2
    _nothing_ran(run)
    assert receipt_body(run)["error"] == "invalid_output"


@pytest.mark.parametrize("call, code", [
    (("c1", "drop_all_tables", {}), "unknown_tool"),
    (("c1", "delete_account", {"account_id": 300}), "invalid_arguments"),
], ids=["unknown-tool", "schema-mismatch"])
def test_a_bad_call_is_refused_and_a_second_in_a_row_fails_the_run(openai_profile, model_server, call, code):
    model_server.default = lambda seen: Reply(json=openai_reply("", [call]))
    run = ask("Delete the account Initech.")
    assert (run.status, run.error) == ("failed", "invalid_output")
    assert [e["code"] for e in kinds(run, "tool_refused")] == [code, code]
    # The first refusal went back to the model as an envelope: that was its repair turn.
    returned = model_server.requests[1].json["messages"][-1]
    # ...fenced as untrusted data, like every tool result.
    assert returned["role"] == "tool" and returned["content"].startswith("<tool_result ")
    assert json.loads(tool_result_payload(returned["content"]))["code"] == code
    _nothing_ran(run)


def test_a_bad_call_the_model_then_corrects_goes_on(openai_profile, model_server):
    model_server.script(Reply(json=openai_reply("", [("c1", "get_account", {"query": 42})])),
                        Reply(json=openai_reply("", [("c2", "get_account", {"query": "Acme"})])),
                        Reply(json=openai_reply("Acme Corp is account A-100.")))
    run = ask("Find Acme.")
    assert run.status == "succeeded", run.error_message


def test_anthropic_garbage_fails_closed_too(model_server, demo, fast_retries):
    use_profile("anthropic-local", backend="anthropic", base_url=model_server.url, max_retries=3)
    reply = anthropic_reply("", [DELETE])
    reply["content"][0]["input"] = '{"account_id": "A-300"}'  # a string, not an object
    model_server.default = lambda seen: Reply(json=reply)
    run = ask("Delete the account Initech.")
    assert (run.status, run.error) == ("failed", "invalid_output")
    _nothing_ran(run)


def test_a_dead_primary_falls_back_and_the_receipt_shows_it(model_server, demo, fast_retries):
    model_server.default = lambda seen: Reply(503, {"error": {"message": "no GPU"}})
    use_profile("vllm-gpu", backend="openai", base_url=model_server.url, max_retries=1, fallbacks=["scripted"])
    run = ask("List all accounts.")
    assert run.status == "succeeded" and "Globex" in run.output
    first = receipt_body(run)["model_calls"][0]
    assert (first["requested_backend"], first["requested_model"]) == ("openai", "test-model")
    assert (first["profile"], first["backend"], first["actual_model"], first["attempts"]) == (
        "scripted", "scripted", "scripted-1", 3)
    attempts = kinds(run, "model_attempt")
    assert [(a["profile"], a["outcome"]) for a in attempts[:3]] == [
        ("vllm-gpu", "failed"), ("vllm-gpu", "failed"), ("scripted", "ok")]
    assert attempts[0]["status"] == 503 and attempts[0]["wait_ms"] > 0


def test_the_key_never_reaches_the_database_events_receipts_or_logs(model_server, demo, fast_retries, monkeypatch,
                                                                     caplog):
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("HOSTED_TEST_KEY", secret)
    model_server.default = lambda seen: Reply(401, {"error": {"message": f"invalid key {seen.headers['authorization']}"}})
    use_profile("hosted", backend="openai", base_url=model_server.url, api_key_env="HOSTED_TEST_KEY")
    run = ask("List all accounts.")
    assert (run.status, run.error) == ("failed", "model_unavailable")
    assert model_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    stored = json.dumps([list(RunEvent.objects.values()), list(Receipt.objects.values("body")),
                         list(ModelProfileHealth.objects.values()), run.error_message, run.state], default=str)
    assert "invalid key Bearer ***" in stored
    assert secret not in stored and secret not in caplog.text


def test_a_reply_that_trips_the_backend_itself_is_recorded_and_fails_closed(openai_profile, model_server):
    # "tool_calls": 5 is no list: whatever the backend makes of it, the run must end as a model
    # failure with the attempt on record, never as an internal error with nothing said.
    model_server.default = lambda seen: Reply(json={"choices": [{"message": {"content": "", "tool_calls": 5}}],
                                                  "model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    run = ask("Delete the account Initech.")
    assert run.status == "failed" and run.error in ("model_unavailable", "invalid_output")
    assert kinds(run, "model_attempt") and all(a["outcome"] != "ok" or a["kind"] for a in kinds(run, "model_attempt"))
    _nothing_ran(run)


def test_negative_token_counts_are_not_believed(openai_profile, model_server):
    model_server.default = lambda seen: Reply(json=openai_reply("Four accounts.") | {
        "usage": {"prompt_tokens": -1_000_000, "completion_tokens": -5}})
    run = ask("List all accounts.")
    assert run.status == "succeeded" and run.input_tokens > 0 and run.output_tokens > 0
    assert kinds(run, "model_call")[0]["tokens_estimated"] is True
