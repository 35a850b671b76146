"""The demo tools, a fake CRM answering them and a conversation that drives the scripted backend
turn by turn, shared by the tests/agents/test_scripted_*.py modules.

No database: the backend is pure, and the fake below answers with the same shapes as the demo
tools (agents/tools/crm.py), from the demo's facts (agents/demo_data.py).
"""

import json

from agents import demo_data
from agents import prompt_format as fmt
from agents.backends.base import ModelRequest, ModelResponse
from agents.backends.scripted import ScriptedBackend
from agents.tools.calculator import evaluate
from agents.tools.knowledge import search

# --- The demo tools and a fake CRM ----------------------------------------------------------


def schema(**properties):
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


TOOL_SCHEMAS = {
    "list_accounts": schema(),
    "get_account": schema(query="An account id (A-100) or a name (Acme Corp)."),
    "get_usage_trend": schema(account_id="An account id like A-100."),
    "list_open_tickets": schema(account_id="An account id like A-100."),
    "compute_health_score": schema(account_id="An account id like A-100."),
    "calculator": schema(expression="Arithmetic, e.g. 240000 * 10 / 100."),
    "search_knowledge": schema(query="A few words to search the knowledge base for."),
    "send_email": schema(to="The recipient's address.", subject="The subject line.", body="Plain text."),
    "delete_account": schema(account_id="The id of the account to delete."),
}


def demo_tools(*names, without=()):
    chosen = names or tuple(TOOL_SCHEMAS)
    return [
        {"name": name, "description": f"The demo {name} tool.", "input_schema": TOOL_SCHEMAS[name]}
        for name in chosen
        if name not in without
    ]


# The demo's own facts, so the fake and the demo cannot drift apart; the real tools read the same
# rows from the database.
ACCOUNTS = {row["account_id"]: row for row in demo_data.ACCOUNTS}
PENALTY = {"P1": 15, "P2": 6, "P3": 2}


def _open_tickets(account_id):
    return [t for t in demo_data.TICKETS if t["account_id"] == account_id and t["status"] == "open"]


def _trend(seats):
    before, recent = sum(seats[-6:-3]), sum(seats[-3:])
    return round((recent - before) * 100 / before, 1)


def _score(account_id):
    account = ACCOUNTS[account_id]
    penalty = sum(PENALTY[t["priority"]] for t in _open_tickets(account_id))
    trend = max(-15, min(15, _trend(account["monthly_active_seats"]) * 0.8))
    score = max(0, min(100, int(100 - penalty + trend + (account["nps"] - 30) * 0.2 - 10 + 0.5)))
    return score, "healthy" if score >= 75 else "needs attention" if score >= 50 else "at risk"


def account_summary(account_id):
    account = ACCOUNTS[account_id]
    return {"id": account_id, **{key: account[key] for key in ("name", "plan", "arr")},
            "renewal_date": account["renewal_date"].isoformat(), "owner": account["owner"]}


def ok(data):
    return {"ok": True, "data": data}


def fake_crm(name, arguments):
    """What the demo tools answer, as envelopes; side effects are denied unless a test says otherwise."""
    account_id = arguments.get("account_id")
    if account_id is not None and account_id not in ACCOUNTS:
        return {"ok": False, "code": "not_found", "error": f"There is no account {account_id}."}
    if name == "list_accounts":
        return ok([account_summary(i) for i in ACCOUNTS])
    if name == "get_account":
        query = arguments["query"].casefold()
        for i, row in ACCOUNTS.items():
            if query in (i.casefold(), row["name"].casefold()) or row["name"].casefold().startswith(query):
                return ok({**account_summary(i), "nps": row["nps"]})
        return {"ok": False, "code": "not_found", "error": f"No account matches {arguments['query']!r}."}
    if account_id is not None:
        about = {"account_id": account_id, "name": ACCOUNTS[account_id]["name"]}
    if name == "get_usage_trend":
        seats = ACCOUNTS[account_id]["monthly_active_seats"]
        trend = _trend(seats)
        direction = "up" if trend >= 1 else "down" if trend <= -1 else "flat"
        return ok({**about, "monthly_active_seats": seats, "trend_percent": trend, "direction": direction})
    if name == "list_open_tickets":
        # Deliberately not in priority order: the answer must sort them itself.
        tickets = [{"id": t["ticket_id"], "priority": t["priority"], "title": t["title"]}
                   for t in reversed(_open_tickets(account_id))]
        return ok({**about, "tickets": tickets})
    if name == "compute_health_score":
        score, label = _score(account_id)
        return ok({**about, "score": score, "label": label})
    if name == "calculator":
        return ok({"expression": arguments["expression"], "result": evaluate(arguments["expression"])})
    if name == "search_knowledge":
        return ok({"query": arguments["query"], "passages": search(arguments["query"])})
    return {"ok": False, "code": "denied", "error": "An approver denied this call."}


# --- Driving a conversation -----------------------------------------------------------------

AGENT = "You are the CRM assistant. Use the tools; never invent numbers."
SKILL_INDEX = fmt.section(
    fmt.SKILLS_HEADING,
    "- account-health-review: Score one account's health from usage, tickets and NPS.\n"
    "- incident-summary: Summarise an account's open incidents, P1 first.\n"
    "- churn-risk-playbook: Rank every account by churn risk.\n",
)
# Shaped like a SKILL.md body: it has "## " headings of its own inside the harness's section.
ACME_SKILL = fmt.skill_section(
    "account-health-review",
    "# Account health review\n\n"
    "Work on the one account the request names.\n\n"
    "## Steps\n\n"
    "1. Find the account with `get_account` (use the name the user gave).\n"
    "2. Read its seat trend with `get_usage_trend(account_id)`.\n"
    "3. List its open tickets with `list_open_tickets`.\n"
    "4. Score it with `compute_health_score` and give the label.\n\n"
    "## Notes\n\n"
    "- Never call `send_email` or `delete_account` from this skill.\n",
)
CHURN_PLAYBOOK = fmt.playbook_section(
    "churn-risk",
    "1. Call `list_accounts` to get every account.\n"
    "2. For each account call `compute_health_score`.\n"
    "3. Rank them worst first and name the owner to contact.\n",
)
OUTPUT_FORMAT = fmt.section(fmt.OUTPUT_FORMAT_HEADING, "Start with a one-line summary, then `bullet` points.\n")


def system(*sections):
    return "\n\n".join((AGENT,) + sections)


class Conversation:
    """A request, the messages so far, and the fake tools answering the backend's calls."""

    def __init__(self, text, *, system_prompt=AGENT, tools=None, answer=fake_crm):
        self.backend = ScriptedBackend()
        self.system = system_prompt
        self.tools = demo_tools() if tools is None else tools
        self.messages = [{"role": "user", "content": text}]
        self.answer = answer

    def request(self):
        return ModelRequest(
            system=self.system, messages=list(self.messages), tools=self.tools, model="scripted-1"
        )

    def step(self) -> ModelResponse:
        """One model call; its tool calls are answered and appended, as the harness would."""
        response = self.backend.complete(self.request())
        message = {"role": "assistant", "content": response.text}
        if response.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
            ]
        self.messages.append(message)
        for call in response.tool_calls:
            envelope = self.answer(call.name, call.arguments)
            self.messages.append(
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": json.dumps(envelope)}
            )
        return response

    def batches(self, limit=10):
        """Every tool batch as [(name, arguments)], then the final answer."""
        batches = []
        for _ in range(limit):
            response = self.step()
            if not response.tool_calls:
                return batches, response.text
            batches.append([(c.name, c.arguments) for c in response.tool_calls])
        raise AssertionError(f"no final answer after {limit} turns: {batches}")


def tool_message(call_id, name, envelope):
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": json.dumps(envelope)}


def assistant_calls(*calls):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls],
    }
