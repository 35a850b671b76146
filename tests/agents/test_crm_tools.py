from decimal import Decimal

import jsonschema
import pytest
from django.utils.module_loading import import_string

from agents import demo_data
from agents.models import CrmAccount, CrmTicket, SentEmail
from agents.tools import crm
from agents.tools.envelopes import ToolContext, ToolError

CTX = ToolContext(run_id="run-test", caller="tester", idempotency_key="run-test:step-3:call-1")


@pytest.fixture
def accounts(db):
    demo_data.load_crm()


def call(tool, ctx=CTX, **args):
    return tool(args, ctx)


# --- Pure arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("account_id", "trend"),
    [("A-100", "12.7"), ("A-200", "-24.1"), ("A-300", "0.8"), ("A-400", "-2.9")],
)
def test_the_usage_trend_compares_the_last_three_months_with_the_three_before(account_id, trend):
    seats = next(row for row in demo_data.ACCOUNTS if row["account_id"] == account_id)["monthly_active_seats"]
    assert crm.usage_trend_percent(seats) == Decimal(trend)


def test_the_usage_trend_of_an_account_without_history_is_zero():
    assert crm.usage_trend_percent([]) == 0
    assert crm.usage_trend_percent([0, 0, 0, 0, 0, 0]) == 0


@pytest.mark.parametrize(
    ("trend", "direction"),
    [("12.7", "up"), ("1.0", "up"), ("0.8", "flat"), ("-0.9", "flat"), ("-1.0", "down"), ("-2.9", "down")],
)
def test_small_changes_count_as_flat(trend, direction):
    assert crm.trend_direction(Decimal(trend)) == direction


def test_the_health_score_adds_up_its_components():
    result = crm.health_score(open_priorities=["P1", "P2", "P2"], trend_percent=Decimal("-24.1"), nps=18)
    assert result == {
        "score": 46,
        "label": "at risk",
        "components": {
            "open_tickets": {"P1": 1, "P2": 2, "P3": 0},
            "ticket_penalty": -27,
            "trend_percent": -24.1,
            "trend_adjustment": -15.0,
            "nps": 18,
            "nps_adjustment": -2.4,
            "baseline_adjustment": -10,
            "raw_score": 45.6,
        },
    }


def test_the_trend_is_rounded_to_one_decimal_before_it_is_weighted():
    result = crm.health_score(open_priorities=[], trend_percent=Decimal("12.72"), nps=30)
    assert result["components"]["trend_adjustment"] == 10.16


def test_the_health_score_is_clamped_to_0_and_100():
    assert crm.health_score(open_priorities=[], trend_percent=Decimal("50"), nps=100)["score"] == 100
    assert crm.health_score(open_priorities=["P1"] * 10, trend_percent=Decimal("-50"), nps=0)["score"] == 0


@pytest.mark.parametrize(
    ("score", "label"),
    [
        (100, "healthy"),
        (75, "healthy"),
        (74, "needs attention"),
        (50, "needs attention"),
        (49, "at risk"),
        (0, "at risk"),
    ],
)
def test_labels_follow_the_thresholds(score, label):
    assert crm.health_label(score) == label


# --- Demo data and tool definitions -----------------------------------------------------------


def test_load_crm_is_idempotent_and_restores_deleted_accounts(accounts):
    CrmAccount.objects.get(account_id="A-300").delete()
    demo_data.load_crm()
    demo_data.load_crm()
    assert CrmAccount.objects.count() == 4
    assert CrmTicket.objects.count() == 6
    assert CrmTicket.objects.get(ticket_id="T-6").account.account_id == "A-300"


def test_the_nine_demo_tools_are_defined_with_strict_schemas_and_real_handlers():
    names = [tool["name"] for tool in demo_data.TOOL_DEFINITIONS]
    assert names == [
        "list_accounts", "get_account", "get_usage_trend", "list_open_tickets", "compute_health_score",
        "calculator", "search_knowledge", "send_email", "delete_account",
    ]
    for tool in demo_data.TOOL_DEFINITIONS:
        assert set(tool) == {"name", "description", "input_schema", "side_effect", "handler"}
        jsonschema.Draft202012Validator.check_schema(tool["input_schema"])
        assert tool["input_schema"]["additionalProperties"] is False
        assert sorted(tool["input_schema"].get("required", [])) == sorted(tool["input_schema"]["properties"])
        assert callable(import_string(tool["handler"]))
    assert [tool["name"] for tool in demo_data.TOOL_DEFINITIONS if tool["side_effect"]] == [
        "send_email", "delete_account",
    ]


def test_the_schemas_reject_malformed_arguments():
    schemas = {tool["name"]: tool["input_schema"] for tool in demo_data.TOOL_DEFINITIONS}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER

    def valid(name, arguments):
        return jsonschema.Draft202012Validator(schemas[name], format_checker=checker).is_valid(arguments)

    assert valid("get_usage_trend", {"account_id": "A-100"})
    assert not valid("get_usage_trend", {"account_id": "Acme"})
    assert not valid("get_usage_trend", {"account_id": "A-100", "extra": 1})
    assert not valid("list_accounts", {"anything": 1})
    assert valid("send_email", {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hi"})
    assert not valid("send_email", {"to": "not an address", "subject": "Renewal", "body": "Hi"})
    assert not valid("send_email", {"to": "dana.whitfield@example.com", "subject": "Renewal"})


# --- Read tools ---------------------------------------------------------------------------------


def test_it_lists_every_account(accounts):
    rows = call(crm.list_accounts)
    assert [row["id"] for row in rows] == ["A-100", "A-200", "A-300", "A-400"]
    assert rows[0] == {
        "id": "A-100",
        "name": "Acme Corp",
        "plan": "Enterprise",
        "arr": 240000,
        "renewal_date": "2026-12-01",
        "owner": "Dana Whitfield",
    }


ACME_QUERIES = ["A-100", "a-100", "Acme Corp", "acme", "ACME", "Acme's", "Acme’s", " acme corp. ", "corp"]


@pytest.mark.parametrize("query", ACME_QUERIES)
def test_it_finds_an_account_by_id_or_name(accounts, query):
    account = call(crm.get_account, query=query)
    assert account == {
        "id": "A-100",
        "name": "Acme Corp",
        "plan": "Enterprise",
        "arr": 240000,
        "renewal_date": "2026-12-01",
        "nps": 52,
        "owner": "Dana Whitfield",
    }


def test_it_reports_an_unknown_account_as_not_found(accounts):
    with pytest.raises(ToolError) as caught:
        call(crm.get_account, query="Hooli")
    assert caught.value.code == "not_found"


def test_it_refuses_to_guess_between_two_matching_accounts(accounts):
    CrmAccount.objects.create(
        account_id="A-500", name="Acme Labs", plan="Pro", arr=1000, renewal_date="2027-01-01", nps=30,
        owner="Marcus Lee", monthly_active_seats=[1, 1, 1, 1, 1, 1],
    )
    with pytest.raises(ToolError) as caught:
        call(crm.get_account, query="acme")
    assert caught.value.code == "not_found"
    assert "A-100" in caught.value.message and "A-500" in caught.value.message
    assert call(crm.get_account, query="Acme Corp")["id"] == "A-100"


def test_it_reports_the_usage_trend(accounts):
    assert call(crm.get_usage_trend, account_id="A-400") == {
        "account_id": "A-400",
        "name": "Umbrella",
        "monthly_active_seats": [1500, 1490, 1470, 1460, 1440, 1430],
        "trend_percent": -2.9,
        "direction": "down",
    }
    assert call(crm.get_usage_trend, account_id="A-100")["direction"] == "up"
    assert call(crm.get_usage_trend, account_id="A-300")["direction"] == "flat"


def test_it_lists_open_tickets_most_urgent_first(accounts):
    globex = CrmAccount.objects.get(account_id="A-200")
    CrmTicket.objects.create(ticket_id="T-10", account=globex, priority="P2", title="Webhook retries")
    CrmTicket.objects.create(ticket_id="T-11", account=globex, priority="P1", title="Done", status="closed")
    result = call(crm.list_open_tickets, account_id="A-200")
    assert result["name"] == "Globex"
    assert [(t["id"], t["priority"]) for t in result["tickets"]] == [
        ("T-2", "P1"), ("T-3", "P2"), ("T-4", "P2"), ("T-10", "P2"),
    ]
    assert result["tickets"][0] == {"id": "T-2", "priority": "P1", "title": "API outage in EU region"}


def test_closed_tickets_are_not_open(accounts):
    assert call(crm.list_open_tickets, account_id="A-300")["tickets"] == []


@pytest.mark.parametrize(
    ("account_id", "name", "score", "label"),
    [
        ("A-100", "Acme Corp", 100, "healthy"),
        ("A-200", "Globex", 46, "at risk"),
        ("A-300", "Initech", 92, "healthy"),
        ("A-400", "Umbrella", 84, "healthy"),
    ],
)
def test_the_demo_accounts_have_their_documented_health_scores(accounts, account_id, name, score, label):
    result = call(crm.compute_health_score, account_id=account_id)
    assert (result["account_id"], result["name"]) == (account_id, name)
    assert (result["score"], result["label"]) == (score, label)


def test_a_closed_ticket_does_not_lower_the_score(accounts):
    components = call(crm.compute_health_score, account_id="A-300")["components"]
    assert components["ticket_penalty"] == 0
    assert components["open_tickets"] == {"P1": 0, "P2": 0, "P3": 0}


ID_TOOLS = [crm.get_usage_trend, crm.list_open_tickets, crm.compute_health_score, crm.delete_account]


@pytest.mark.parametrize("tool", ID_TOOLS)
def test_id_tools_report_a_missing_account_as_not_found(accounts, tool):
    with pytest.raises(ToolError) as caught:
        call(tool, account_id="A-999")
    assert caught.value.code == "not_found"


@pytest.mark.parametrize("tool", ID_TOOLS)
def test_id_tools_refuse_something_that_is_not_an_id(accounts, tool):
    with pytest.raises(ToolError) as caught:
        call(tool, account_id="Acme")
    assert caught.value.code == "invalid_arguments"


# --- Side effects -------------------------------------------------------------------------------


EMAIL = {"to": "dana.whitfield@example.com", "subject": "Acme renewal", "body": "Hello Dana, ..."}


def test_send_email_records_the_message(db):
    result = crm.send_email(EMAIL, CTX)
    email = SentEmail.objects.get()
    assert result == {
        "message_id": f"msg-{email.pk}",
        "to": "dana.whitfield@example.com",
        "subject": "Acme renewal",
        "status": "sent",
        "sent_at": email.sent_at.isoformat(),
    }
    assert (email.idempotency_key, email.body) == (CTX.idempotency_key, "Hello Dana, ...")


def test_send_email_sends_once_per_idempotency_key(db):
    first = crm.send_email(EMAIL, CTX)
    again = crm.send_email(EMAIL, CTX)
    assert again == first
    assert SentEmail.objects.count() == 1
    crm.send_email(EMAIL, ToolContext(run_id="run-test", caller="tester", idempotency_key="another-call"))
    assert SentEmail.objects.count() == 2


def test_send_email_refuses_to_reuse_a_key_for_a_different_message(db):
    crm.send_email(EMAIL, CTX)
    with pytest.raises(ToolError) as caught:
        crm.send_email({**EMAIL, "body": "Something else"}, CTX)
    assert caught.value.code == "idempotency_conflict"
    assert SentEmail.objects.count() == 1


def test_send_email_refuses_to_run_without_an_idempotency_key(db):
    with pytest.raises(ToolError):
        crm.send_email(EMAIL, ToolContext(run_id="run-test", caller="tester"))
    assert not SentEmail.objects.exists()


@pytest.mark.parametrize("change", [{"to": "nobody"}, {"subject": ""}, {"body": "   "}])
def test_send_email_refuses_malformed_messages(db, change):
    with pytest.raises(ToolError) as caught:
        crm.send_email({**EMAIL, **change}, CTX)
    assert caught.value.code == "invalid_arguments"
    assert not SentEmail.objects.exists()


def test_delete_account_removes_the_account_and_its_tickets(accounts):
    result = call(crm.delete_account, account_id="A-200")
    assert result == {"account_id": "A-200", "name": "Globex", "deleted": True, "tickets_deleted": 3}
    assert not CrmAccount.objects.filter(account_id="A-200").exists()
    assert not CrmTicket.objects.filter(ticket_id__in=["T-2", "T-3", "T-4"]).exists()
    assert CrmAccount.objects.count() == 3


def test_deleting_an_account_twice_reports_not_found(accounts):
    call(crm.delete_account, account_id="A-300")
    with pytest.raises(ToolError) as caught:
        call(crm.delete_account, account_id="A-300")
    assert caught.value.code == "not_found"
