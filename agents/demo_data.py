"""The demo's fixed facts: a small CRM and the nine tools that operate on it.

`load_crm()` writes the CRM rows; `TOOL_DEFINITIONS` is what `load_demo` registers as Tool rows.
"""

from datetime import date

ACCOUNTS = [
    {
        "account_id": "A-100",
        "name": "Acme Corp",
        "plan": "Enterprise",
        "arr": 240000,
        "renewal_date": date(2026, 12, 1),
        "nps": 52,
        "owner": "Dana Whitfield",
        "monthly_active_seats": [820, 845, 890, 910, 960, 1010],
    },
    {
        "account_id": "A-200",
        "name": "Globex",
        "plan": "Pro",
        "arr": 96000,
        "renewal_date": date(2026, 11, 15),
        "nps": 18,
        "owner": "Marcus Lee",
        "monthly_active_seats": [700, 660, 610, 540, 500, 455],
    },
    {
        "account_id": "A-300",
        "name": "Initech",
        "plan": "Starter",
        "arr": 18000,
        "renewal_date": date(2027, 2, 1),
        "nps": 35,
        "owner": "Priya Nair",
        "monthly_active_seats": [200, 201, 199, 202, 200, 203],
    },
    {
        "account_id": "A-400",
        "name": "Umbrella",
        "plan": "Enterprise",
        "arr": 410000,
        "renewal_date": date(2026, 12, 20),
        "nps": 41,
        "owner": "Dana Whitfield",
        "monthly_active_seats": [1500, 1490, 1470, 1460, 1440, 1430],
    },
]

_TICKET_FIELDS = ("ticket_id", "account_id", "priority", "title", "status")
TICKETS = [
    dict(zip(_TICKET_FIELDS, row))
    for row in (
        ("T-1", "A-100", "P3", "Dashboard colour palette request", "open"),
        ("T-2", "A-200", "P1", "API outage in EU region", "open"),
        ("T-3", "A-200", "P2", "Export job times out", "open"),
        ("T-4", "A-200", "P2", "SSO login loop", "open"),
        ("T-5", "A-400", "P2", "Slow report generation", "open"),
        ("T-6", "A-300", "P3", "Invoice address change", "closed"),
    )
]


def load_crm() -> None:
    """Create or reset the demo CRM rows. Safe to run any number of times; restores deleted accounts."""
    from django.db import transaction

    from agents.models import CrmAccount, CrmTicket

    with transaction.atomic():
        accounts = {}
        for row in ACCOUNTS:
            fields = {key: value for key, value in row.items() if key != "account_id"}
            fields["monthly_active_seats"] = list(row["monthly_active_seats"])
            accounts[row["account_id"]], _ = CrmAccount.objects.update_or_create(
                account_id=row["account_id"], defaults=fields
            )
        for row in TICKETS:
            CrmTicket.objects.update_or_create(
                ticket_id=row["ticket_id"],
                defaults={
                    "account": accounts[row["account_id"]],
                    "priority": row["priority"],
                    "title": row["title"],
                    "status": row["status"],
                },
            )


# --- Tool definitions ---------------------------------------------------------------------

_ACCOUNT_ID = {
    "type": "string",
    "pattern": "^A-[0-9]+$",
    "maxLength": 16,
    "description": "The account id, e.g. \"A-100\".",
}


def _arguments(properties: dict | None = None) -> dict:
    schema = {"type": "object", "properties": properties or {}, "additionalProperties": False}
    if properties:
        schema["required"] = list(properties)
    return schema


# Whose words each tool's result carries, which decides whether reading it taints a run
# (agents.trust). Trusted: the CRM's account rows (names, plans, owners, seat counts, NPS) are
# kept by our own account team, not typed by customers; the calculator computes on the model's
# own expression; send_email and delete_account answer with Warrant's own confirmation of what
# they did. Untrusted: ticket titles are written by customers, and knowledge-base pages by whoever
# may edit the wiki (the injection suite plants passages there). Anything discovered from an MCP
# server or an OpenAPI service is untrusted until a governance admin marks its source.
TRUSTED_OUTPUT = {
    "list_accounts": "account rows kept by the account team",
    "get_account": "account rows kept by the account team",
    "get_usage_trend": "seat counts and a computed trend",
    "compute_health_score": "computed from ticket priorities (not their titles), seat counts and NPS",
    "calculator": "a pure computation on the model's own expression",
    "send_email": "Warrant's own confirmation of what it sent",
    "delete_account": "Warrant's own confirmation of what it deleted",
}
UNTRUSTED_OUTPUT = {
    "list_open_tickets": "ticket titles are written by customers",
    "search_knowledge": "knowledge-base pages are written by whoever may edit the wiki",
}

TOOL_DEFINITIONS = [
    {
        "name": "list_accounts",
        "description": (
            "List every customer account in the CRM with its id, name, plan, annual recurring revenue "
            "(arr), renewal date and owner. Read-only."
        ),
        "input_schema": _arguments(),
        "side_effect": False,
        "handler": "agents.tools.crm.list_accounts",
    },
    {
        "name": "get_account",
        "description": (
            "Look up one customer account by id (\"A-100\") or by name or part of a name (\"acme\"), "
            "returning its plan, arr, renewal date, NPS and owner. Read-only."
        ),
        "input_schema": _arguments(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 128,
                    "description": "An account id or an account name (or a distinctive part of it).",
                }
            }
        ),
        "side_effect": False,
        "handler": "agents.tools.crm.get_account",
    },
    {
        "name": "get_usage_trend",
        "description": (
            "Return an account's monthly active seats for the last six months and the trend: the mean "
            "of the last three months against the three before, in percent. Read-only."
        ),
        "input_schema": _arguments({"account_id": _ACCOUNT_ID}),
        "side_effect": False,
        "handler": "agents.tools.crm.get_usage_trend",
    },
    {
        "name": "list_open_tickets",
        "description": (
            "List an account's open support tickets, most urgent first (P1 before P2 before P3). "
            "Read-only."
        ),
        "input_schema": _arguments({"account_id": _ACCOUNT_ID}),
        "side_effect": False,
        "handler": "agents.tools.crm.list_open_tickets",
    },
    {
        "name": "compute_health_score",
        "description": (
            "Compute an account's health score (0-100) and label (healthy, needs attention, at risk) "
            "from its open tickets, usage trend and NPS, with the components shown. Read-only."
        ),
        "input_schema": _arguments({"account_id": _ACCOUNT_ID}),
        "side_effect": False,
        "handler": "agents.tools.crm.compute_health_score",
    },
    {
        "name": "calculator",
        "description": (
            "Evaluate an arithmetic expression exactly: numbers, + - * / // % ** and parentheses; "
            "\"10%\" means 0.1 and \"10% of 240000\" works. No variables or functions. Read-only."
        ),
        "input_schema": _arguments(
            {
                "expression": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "For example \"240000 * 10%\" or \"(910 + 960 + 1010) / 3\".",
                }
            }
        ),
        "side_effect": False,
        "handler": "agents.tools.calculator.calculator",
    },
    {
        "name": "search_knowledge",
        "description": (
            "Search the company knowledge base (renewals, incident SLAs, churn signals, email "
            "etiquette, data retention, discounts) and return up to three passages to cite by id. "
            "Read-only."
        ),
        "input_schema": _arguments(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "A few keywords, e.g. \"renewal notice\".",
                }
            }
        ),
        "side_effect": False,
        "handler": "agents.tools.knowledge.search_knowledge",
    },
    {
        "name": "send_email",
        "description": (
            "Send an email to one recipient. SIDE EFFECT: the message really leaves and cannot be "
            "recalled, so it is sent once and may need a human's approval first."
        ),
        "input_schema": _arguments(
            {
                "to": {
                    "type": "string",
                    "format": "email",
                    "pattern": "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$",
                    "maxLength": 254,
                    "description": "The recipient's address.",
                },
                "subject": {"type": "string", "minLength": 1, "maxLength": 255},
                "body": {"type": "string", "minLength": 1, "maxLength": 10000},
            }
        ),
        "side_effect": True,
        "handler": "agents.tools.crm.send_email",
    },
    {
        "name": "delete_account",
        "description": (
            "Permanently delete a customer account and all its tickets from the CRM. SIDE EFFECT: "
            "irreversible, and may need a human's approval first."
        ),
        "input_schema": _arguments({"account_id": _ACCOUNT_ID}),
        "side_effect": True,
        "handler": "agents.tools.crm.delete_account",
    },
]
