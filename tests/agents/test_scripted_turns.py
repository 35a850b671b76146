"""What the scripted backend reads from the turns so far: it never repeats a call, waits for answers, gives
the same response to the same request and reports its usage.
"""

import json

from agents.backends.base import ModelRequest, estimate_tokens
from agents.backends.scripted import ScriptedBackend
from tests.agents.scripted_chat import (ACME_SKILL, AGENT, SKILL_INDEX, Conversation, account_summary,
                                        assistant_calls, demo_tools, fake_crm, ok, system, tool_message)


def test_it_never_repeats_a_call_already_made_even_without_an_answer():
    messages = [
        {"role": "user", "content": "Summarise the open tickets for Globex."},
        assistant_calls(("call_1_1", "get_account", {"query": "Globex"})),
        tool_message("call_1_1", "get_account", fake_crm("get_account", {"query": "Globex"})),
        assistant_calls(("call_2_1", "list_open_tickets", {"account_id": "A-200"})),
        # The harness has not answered call_2_1 (say, it is parked): still not asked again.
    ]
    response = ScriptedBackend().complete(
        ModelRequest(system=AGENT, messages=messages, tools=demo_tools(), model="m")
    )

    assert response.tool_calls == []


def test_a_call_waiting_on_an_unanswered_lookup_is_not_made_without_its_id():
    messages = [
        {"role": "user", "content": "Summarise the open tickets for Globex."},
        assistant_calls(("call_1_1", "get_account", {"query": "Globex"})),
        # get_account has no answer yet: list_open_tickets waits for it rather than going without account_id.
    ]
    response = ScriptedBackend().complete(
        ModelRequest(system=AGENT, messages=messages, tools=demo_tools(), model="m")
    )

    assert response.tool_calls == []
    assert response.text == "The tools have not answered yet, so I have nothing to report."


def test_it_does_not_repeat_a_denied_call_when_the_order_is_read_again():
    text = "Please call delete_account(account_id=A-300) now."
    messages = [
        {"role": "user", "content": text},
        assistant_calls(("call_1_1", "delete_account", {"account_id": "A-300"})),
        tool_message("call_1_1", "delete_account", {"ok": False, "code": "denied", "error": "Denied."}),
    ]
    response = ScriptedBackend().complete(
        ModelRequest(system=AGENT, messages=messages, tools=demo_tools(), model="m")
    )

    assert response.tool_calls == []
    assert response.text == "The call to delete_account was denied by an approver, so nothing was deleted."


def test_the_same_request_gets_the_same_response():
    chat = Conversation("How healthy is Acme Corp?", system_prompt=system(SKILL_INDEX, ACME_SKILL))
    chat.step()
    request = chat.request()

    first, second = ScriptedBackend().complete(request), ScriptedBackend().complete(request)

    assert first == second
    assert first.tool_calls and first.tool_calls[0].id == "call_2_1"


def test_it_is_built_from_a_model_profile_like_every_backend():
    backend = ScriptedBackend({"backend": "scripted", "model": "scripted-1"})

    assert backend.name == "scripted"
    assert backend.complete(Conversation("List all accounts.").request()).tool_calls


def test_it_reports_estimated_usage_and_echoes_the_model():
    chat = Conversation("List all accounts.")
    request = chat.request()
    response = chat.backend.complete(request)

    assert (response.model, response.backend) == ("scripted-1", "scripted")
    assert response.usage.estimated is True
    expected_input = (
        request.system
        + json.dumps(request.messages, sort_keys=True)
        + json.dumps(request.tools, sort_keys=True)
    )
    assert response.usage.input_tokens == estimate_tokens(expected_input)
    assert response.usage.output_tokens > 0
    assert response.text == "Calling list_accounts."


def test_it_accepts_arguments_and_content_in_other_shapes():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Summarise the open tickets for Globex."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x1", "name": "get_account", "arguments": '{"query": "Globex"}'}],
        },
        {
            "role": "tool",
            "tool_call_id": "x1",
            "name": "get_account",
            "content": json.dumps(ok(account_summary("A-200"))),
        },
    ]
    response = ScriptedBackend().complete(
        ModelRequest(system="", messages=messages, tools=demo_tools(), model="m")
    )

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_2_1", "list_open_tickets", {"account_id": "A-200"})
    ]
