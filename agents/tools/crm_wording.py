"""How the scripted backend speaks about the demo tools of agents/tools/crm.py (and the answers of
the knowledge search, agents/tools/knowledge.py); the calculator's words are in calculator_wording.

Read by agents.backends.scripted_text.wording: which request words mean which tools' words, which
phrases order an email or a deletion without naming the tool and how they fill the call, how an
email's subject and body are worded, and how each tool's result reads in an answer. Pure: no ORM,
no settings.
"""

import re

from agents.backends.scripted_plan import Fill, rows
from agents.backends.scripted_text import ADDRESS, phrase_after, sentences
from agents.tools.calculator_wording import number_text

# Request words (stems) that name what a tool or a record's field is about without using its words.
SYNONYMS = {"risk": "health", "churn": "health", "churning": "health", "incident": "ticket", "issue": "ticket",
            "seat": "usage", "revenue": "arr"}
NAME = r"[A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*"  # a run of capitalised words
_TARGET = rf"""(A-\d+|"[^"]+"|'[^']+'|{NAME}|[\w-]+)"""


# (tool, pattern): group 1 is the address to write to, or the record (id or name) to delete. The planner fills
# the rest of the call as for a step about that target.
ORDERS = (
    ("send_email", rf"(?i)\b(?:send|write|forward)\s+(?:an?\s+|the\s+)?(?:e-?mail|message|note)\s+to\s+({ADDRESS})"),
    ("send_email", rf"(?i)\be-?mail\s+({ADDRESS})"),
    # Case matters for a name (a run of capitalised words) but not for the verb around it.
    ("delete_account", r"\b(?i:delete|remove)\s+(?i:the\s+)?(?i:account)\s+(?:(?i:named|called|for|of)\s+)?" + _TARGET),
    ("delete_account", rf"\b(?i:delete|remove)\s+(?i:the\s+)?({NAME})['’]s\s+(?i:account)\b"),
)


# --- Emails ---------------------------------------------------------------------------------


def email(text: str, address: str, tool_description: str = "") -> dict:
    """A short, polite email to `address` about whatever the ordering sentence names, signed as the
    tool's guide asks ("sign as 'Customer Success'")."""
    sentence = next((s for s in sentences(text) if address in s), text.strip())
    about = phrase_after("about|regarding|concerning|re:?", sentence.split(address, 1)[-1])
    subject = re.sub(r"^(?:the|our|a|an)\s+", "", about, flags=re.I)
    subject = subject[:1].upper() + subject[1:] if subject else "Following up"
    local = re.split(r"[._+-]", address.split("@")[0])[0]
    sign = re.search(r"\bsign(?:ed)?(?: off)? as ['\"‘“]([^'\"’”\n]{1,60})['\"’”]", tool_description or "", re.I)
    sign_as = sign.group(1).strip() if sign else ""
    greeting = f"Hi {local.capitalize()}," if local.isalpha() else "Hello,"
    opening = f"I am writing about {about}." if about else "I am following up on your account."
    body = (
        f"{greeting}\n\n{opening} Please let me know if you have any questions or would like to talk it through."
        "\n\nKind regards" + (f",\n{sign_as}" if sign_as else "")
    )
    return {"to": address, "subject": subject, "body": body}


# --- Answers --------------------------------------------------------------------------------


def _label(said, record_id: str) -> str:
    """How an answer names a record: "Acme Corp (A-100)" once a result gave its name, else its id."""
    return f"{said.names[record_id]} ({record_id})" if record_id in said.names else record_id


def _as_number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("inf")


def _data(call) -> dict:
    return call.data if isinstance(call.data, dict) else {}


def health(calls, said) -> str:
    scores = {}
    for call in calls:
        data = _data(call)
        score = data.get("score", data.get("health_score"))
        number = _as_number(score)
        label = data.get("label") or ("healthy" if number >= 75 else "needs attention" if number >= 50 else "at risk")
        scores[data.get("account_id") or call.arguments.get("account_id") or "?"] = (score, label)
    if len(scores) == 1:
        account_id, (score, label) = next(iter(scores.items()))
        return f"{_label(said, account_id)} has a health score of {number_text(score)} — {label}."
    ranked = sorted(scores.items(), key=lambda row: (_as_number(row[1][0]), row[0]))
    return "Accounts by health score, most at risk first:\n" + "\n".join(
        f"{rank}. {_label(said, account_id)}: {number_text(score)}, {label}"
        for rank, (account_id, (score, label)) in enumerate(ranked, start=1)
    )


def _account_line(record: dict, said) -> str:
    facts = []
    if record.get("plan"):
        facts.append(f"{record['plan']} plan")
    if record.get("arr") is not None:
        facts.append(f"ARR {number_text(record['arr'])}")
    if record.get("renewal_date"):
        facts.append(f"renews {record['renewal_date']}")
    if record.get("nps") is not None:
        facts.append(f"NPS {record['nps']}")
    if record.get("owner"):
        facts.append(f"owner {record['owner']}")
    account_id = record.get("id") or record.get("account_id") or ""
    who = _label(said, account_id) if account_id else str(record.get("name", "An account"))
    return f"{who}: {', '.join(facts)}" if facts else who


def get_account(call, said) -> str:
    found = rows(call.data)
    return _account_line(found[0], said) + "." if found else "No account was found."


def list_accounts(call, said) -> str:
    found = rows(call.data)
    if not found:
        return "There are no accounts."
    return f"Accounts ({len(found)}):\n" + "\n".join(f"- {_account_line(r, said)}" for r in found)


def usage(call, said) -> str:
    data = _data(call)
    who = _label(said, data.get("account_id") or call.arguments.get("account_id", ""))
    seats = data.get("monthly_active_seats") or data.get("seats") or []
    trend, direction = data.get("trend_percent", data.get("trend")), str(data.get("direction") or "")
    parts = []
    if seats:
        series = ", ".join(number_text(seat) for seat in seats)
        parts.append(f"{number_text(seats[-1])} monthly active seats now ({series} over the last {len(seats)} months)")
    if isinstance(trend, (int, float)):
        word = {"up": "growing", "down": "declining", "flat": "flat"}.get(direction, direction) or (
            "growing" if trend > 0 else "declining" if trend < 0 else "flat")
        parts.append(f"trend {trend:+.1f}%, {word}")
    return f"Usage for {who}: " + "; ".join(parts) + "." if parts else f"No usage data for {who}."


def tickets(call, said) -> str:
    data = call.data
    account_id = (data.get("account_id") if isinstance(data, dict) else None) or call.arguments.get("account_id", "")
    open_tickets = data.get("tickets", []) if isinstance(data, dict) else data
    open_tickets = [t for t in open_tickets or [] if isinstance(t, dict) and t.get("status", "open") == "open"]
    if not open_tickets:
        return f"{_label(said, account_id)} has no open tickets."

    def order(ticket):  # priority, then the id's numbers as numbers (T-2 before T-10)
        return str(ticket.get("priority", "P9")), [
            int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(ticket.get("id", "")))]

    lines = [f"- {t.get('id', '?')} [{t.get('priority', '?')}] {t.get('title') or t.get('subject') or ''}".rstrip()
             for t in sorted(open_tickets, key=order)]
    return f"Open tickets for {_label(said, account_id)}:\n" + "\n".join(lines)


def knowledge(call, said) -> str:
    data, query = call.data, call.arguments.get("query", "")
    passages = data.get("passages", data.get("results", [])) if isinstance(data, dict) else data
    passages = [p for p in passages or [] if isinstance(p, dict)]
    if not passages:
        return f'The knowledge base has nothing on "{query}".'
    lines = []
    for passage in passages:
        text = str(passage.get("text") or passage.get("passage") or passage.get("content") or "")
        summary = next(iter(sentences(text)), "")
        title, cite = passage.get("title"), passage.get("citation") or f"[{passage.get('id', '?')}]"
        lines.append(f"- {title + ': ' if title else ''}{summary} {cite}".replace("  ", " "))
    return f'What the knowledge base says about "{query}":\n' + "\n".join(lines)


def sent(call, said) -> str:
    data = _data(call)
    reference = f" ({data['message_id']})" if data.get("message_id") else ""
    return (f"Email sent to {data.get('to') or call.arguments.get('to', '')} with the subject "
            f"\"{data.get('subject') or call.arguments.get('subject', '')}\"{reference}.")


def deleted(call, said) -> str:
    account_id = _data(call).get("account_id") or call.arguments.get("account_id", "")
    return f"The account {_label(said, account_id)} was deleted."


ANSWERS = {"get_account": get_account, "list_accounts": list_accounts, "get_usage_trend": usage,
           "list_open_tickets": tickets, "search_knowledge": knowledge, "send_email": sent,
           "delete_account": deleted}
SUMMARIES = {"compute_health_score": health}


def _email_part(key: str):
    """A filler of an email's `subject` or `body`, worded for the first address the request gives."""
    def fill(plan, tool, scope) -> Fill | None:
        if tool == "send_email" and scope.emails:
            guide = str((plan.tools.get(tool) or {}).get("description") or "")
            return Fill("ready", [email(scope.text, scope.emails[0], guide)[key]])
        return None  # another tool's subject, or no address: the planner's own rules
    return fill


FILLS = {"subject": _email_part("subject"), "body": _email_part("body")}  # property -> filler(plan, tool, scope)
