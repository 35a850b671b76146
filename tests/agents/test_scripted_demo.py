"""The scripted backend answering the demo requests against the fake CRM, and the tools' errors."""

import pytest

from agents.backends.base import ModelRequest
from agents.backends.scripted import ScriptedBackend
from tests.agents.scripted_chat import (ACME_SKILL, AGENT, CHURN_PLAYBOOK, OUTPUT_FORMAT, SKILL_INDEX, Conversation,
                                        demo_tools, ok, system)


def test_it_follows_the_account_health_skill_steps_in_order():
    chat = Conversation(
        "How healthy is Acme Corp?", system_prompt=system(SKILL_INDEX, ACME_SKILL, OUTPUT_FORMAT)
    )

    first = chat.step()
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_1_1", "get_account", {"query": "Acme Corp"})
    ]
    second = chat.step()
    assert [(c.id, c.name, c.arguments) for c in second.tool_calls] == [
        ("call_2_1", "get_usage_trend", {"account_id": "A-100"}),
        ("call_2_2", "list_open_tickets", {"account_id": "A-100"}),
        ("call_2_3", "compute_health_score", {"account_id": "A-100"}),
    ]
    final = chat.step()
    assert final.tool_calls == []
    assert final.text.startswith("Acme Corp (A-100) has a health score of 100 — healthy.")
    assert "- T-1 [P3] Dashboard colour palette request" in final.text
    assert "+12.7%" in final.text


def test_it_ranks_every_account_by_churn_risk_worst_first_from_the_playbook():
    chat = Conversation("Which accounts are most at risk of churning?", system_prompt=system(CHURN_PLAYBOOK))

    batches, answer = chat.batches()

    assert batches == [
        [("list_accounts", {})],
        [("compute_health_score", {"account_id": i}) for i in ("A-100", "A-200", "A-300", "A-400")],
    ]
    assert answer.splitlines()[1:] == [
        "1. Globex (A-200): 46, at risk",
        "2. Umbrella (A-400): 84, healthy",
        "3. Initech (A-300): 92, healthy",
        "4. Acme Corp (A-100): 100, healthy",
    ]


def test_it_ranks_churn_risk_without_a_playbook_too():
    batches, answer = Conversation("Which accounts are most at risk of churning?").batches()

    assert batches[0] == [("list_accounts", {})]
    assert len(batches[1]) == 4
    assert "1. Globex (A-200): 46, at risk" in answer


def test_it_lists_all_accounts_with_one_line_each_and_no_lookups():
    batches, answer = Conversation("List all accounts.").batches()

    assert batches == [[("list_accounts", {})]]
    lines = answer.splitlines()
    assert lines[0] == "Accounts (4):"
    assert lines[1].startswith("- Acme Corp (A-100): Enterprise plan, ARR 240000")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "- Acme Corp (A-100)",
        "- Globex (A-200)",
        "- Initech (A-300)",
        "- Umbrella (A-400)",
    ]


def test_it_resolves_globex_then_lists_its_open_tickets_p1_first():
    batches, answer = Conversation("Summarise the open tickets for Globex.").batches()

    assert batches == [
        [("get_account", {"query": "Globex"})],
        [("list_open_tickets", {"account_id": "A-200"})],
    ]
    assert answer.splitlines() == [
        "Open tickets for Globex (A-200):",
        "- T-2 [P1] API outage in EU region",
        "- T-3 [P2] Export job times out",
        "- T-4 [P2] SSO login loop",
    ]


def test_it_reports_the_usage_trend_for_umbrella_with_seats_and_direction():
    batches, answer = Conversation("What is the usage trend for Umbrella?").batches()

    assert batches == [
        [("get_account", {"query": "Umbrella"})],
        [("get_usage_trend", {"account_id": "A-400"})],
    ]
    assert answer.startswith("Usage for Umbrella (A-400): 1430 monthly active seats")
    assert "trend -2.9%, declining" in answer


def test_it_takes_ten_percent_of_acmes_arr_with_the_calculator():
    batches, answer = Conversation("What is 10% of Acme's ARR?").batches()

    assert batches == [
        [("get_account", {"query": "Acme"})],
        [("calculator", {"expression": "240000 * 10 / 100"})],
    ]
    assert answer == "10% of Acme Corp's ARR (240000) = 24000."


def test_it_calculates_plain_arithmetic_without_any_lookup():
    batches, answer = Conversation("What is 12 * (3 + 4)?").batches()

    assert batches == [[("calculator", {"expression": "12 * (3 + 4)"})]]
    assert answer == "12 * (3 + 4) = 84."


def test_it_cites_knowledge_base_passages_about_renewals():
    batches, answer = Conversation("What does our knowledge base say about renewals?").batches()

    assert batches == [[("search_knowledge", {"query": "renewals"})]]
    assert "[kb-renewals-1]" in answer and "[kb-renewals-2]" in answer
    assert "90 days before the renewal date" in answer


def test_it_drafts_the_renewal_email_and_reports_a_denial_honestly():
    def deny_with_reason(name, arguments):
        return {
            "ok": False,
            "code": "denied",
            "error": "Denied.",
            "details": {"reason": "Use the shared inbox"},
        }

    chat = Conversation(
        "Send an email to dana.whitfield@example.com about the Acme renewal.", answer=deny_with_reason
    )
    batches, answer = chat.batches()

    assert len(batches) == 1
    [(name, arguments)] = batches[0]
    assert name == "send_email"
    assert arguments["to"] == "dana.whitfield@example.com"
    assert arguments["subject"] == "Acme renewal"
    assert arguments["body"].startswith("Hi Dana,")
    assert "the Acme renewal" in arguments["body"]
    assert answer == (
        "The call to send_email was denied by an approver, so nothing was sent. "
        "The approver's reason: Use the shared inbox."
    )


def test_it_signs_the_email_as_the_tool_guide_asks():
    tools = demo_tools()
    tools[7] = {
        **tools[7],
        "description": tools[7]["description"] + "\n\nGuidance (email-etiquette): Write in a friendly tone, "
        "never include internal scores, and sign as 'Customer Success'.",
    }
    chat = Conversation("Send an email to dana.whitfield@example.com about the Acme renewal.", tools=tools)

    batches, _ = chat.batches()

    [[(name, arguments)]] = batches
    assert name == "send_email"
    assert arguments["body"].endswith("Kind regards,\nCustomer Success")


def test_it_says_an_email_was_sent_only_when_the_tool_says_so():
    def approved(name, arguments):
        return ok(
            {"message_id": "msg-1", "to": arguments["to"], "subject": arguments["subject"], "status": "sent"}
        )

    _, answer = Conversation(
        "Send an email to dana.whitfield@example.com about the Acme renewal.", answer=approved
    ).batches()

    assert answer == 'Email sent to dana.whitfield@example.com with the subject "Acme renewal" (msg-1).'


def test_it_reports_an_expired_approval_as_not_sent():
    def expired(name, arguments):
        return {"ok": False, "code": "expired", "error": "The approval request expired."}

    _, answer = Conversation("Send an email to ops@example.com about the outage.", answer=expired).batches()

    assert answer == "The approval request for send_email expired before anyone decided, so nothing was sent."


def test_it_resolves_initech_before_asking_to_delete_it():
    batches, answer = Conversation("Delete the account Initech.").batches()

    assert batches == [[("get_account", {"query": "Initech"})], [("delete_account", {"account_id": "A-300"})]]
    assert answer == "The call to delete_account was denied by an approver, so nothing was deleted."


def test_a_deletion_ordered_by_id_needs_no_lookup():
    batches, _ = Conversation("Remove account A-400.").batches()

    assert batches == [[("delete_account", {"account_id": "A-400"})]]


def test_it_cannot_help_with_a_salary_question():
    response = ScriptedBackend().complete(
        ModelRequest(
            system=AGENT,
            messages=[{"role": "user", "content": "What is Dana Whitfield's salary?"}],
            tools=demo_tools(),
            model="m",
        )
    )

    assert response.tool_calls == []
    assert response.text == "I can't help with that using the tools available to me."


# --- Errors and resolution failures ---------------------------------------------------------


def test_it_skips_the_dependent_steps_when_the_account_is_not_found():
    chat = Conversation("How healthy is Hooli?", system_prompt=system(ACME_SKILL))

    batches, answer = chat.batches()

    assert batches == [[("get_account", {"query": "Hooli"})]]
    assert answer == "get_account failed: No account matches 'Hooli'."


@pytest.mark.parametrize("code", ["not_permitted", "unknown_tool"])
def test_it_says_it_is_not_permitted_when_the_harness_refuses_a_tool(code):
    def refuse(name, arguments):
        return {"ok": False, "code": code, "error": f"{name} is not available to this caller."}

    _, answer = Conversation("List all accounts.", answer=refuse).batches()

    assert answer == "I am not permitted to use list_accounts."


def test_it_passes_other_tool_errors_on_verbatim():
    def time_out(name, arguments):
        return {"ok": False, "code": "timeout", "error": "The tool took longer than 10 s."}

    _, answer = Conversation("What is 2 + 2?", answer=time_out).batches()

    assert answer == "calculator failed: The tool took longer than 10 s."


def test_it_explains_what_is_missing_when_no_call_can_be_made():
    _, answer = Conversation("Send an email about the renewal.").batches()

    assert answer == "I could not do that: send_email: no email address given."
