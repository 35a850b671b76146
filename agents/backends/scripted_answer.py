"""The scripted backend's final answer: plain sentences built from the tool results, in order.

Lookups (get_account, list_accounts) only speak for themselves when nothing else was asked; errors
are reported as what they are, so a denied email never reads as a sent one.
"""

import json
import re

from agents.backends.scripted_history import LISTER, RESOLVER, Knowledge, PastCall, records
from agents.backends.scripted_text import number_text, sentences

CANNOT_HELP = "I can't help with that using the tools available to me."
_PERMISSION_CODES = frozenset({"not_permitted", "unknown_tool", "forbidden", "not_allowed"})
_DIRECTION_WORDS = {"up": "growing", "down": "declining", "flat": "flat"}


def compose(calls: list[PastCall], knowledge: Knowledge, *, describe_calculation, skipped: list[str]) -> str:
    answered = [call for call in calls if call.envelope is not None]
    if not answered:
        if skipped:
            return f"I could not do that: {skipped[0]}."
        return CANNOT_HELP if not calls else "The tools have not answered yet, so I have nothing to report."

    asked_more = any(call.name not in (RESOLVER, LISTER) for call in answered)
    blocks: list[str] = []
    scores = [call for call in answered if call.ok and call.name == "compute_health_score"]
    if scores:
        blocks.append(_health(scores, knowledge))
    for call in answered:
        if not call.ok or call.name == "compute_health_score":
            continue
        if call.name in (RESOLVER, LISTER) and asked_more:
            continue
        blocks.append(_render(call, knowledge, describe_calculation))
    blocks.extend(_error(call) for call in answered if not call.ok)
    return "\n\n".join(dict.fromkeys(block for block in blocks if block))


# --- Successful results ---------------------------------------------------------------------


def _health(calls: list[PastCall], knowledge: Knowledge) -> str:
    rows = {}
    for call in calls:
        data = call.data if isinstance(call.data, dict) else {}
        account_id = data.get("account_id") or call.arguments.get("account_id") or "?"
        score = data.get("score", data.get("health_score"))
        rows[account_id] = (score, data.get("label") or _label(score))
    if len(rows) == 1:
        account_id, (score, label) = next(iter(rows.items()))
        return f"{knowledge.label(account_id)} has a health score of {number_text(score)} — {label}."
    ranked = sorted(rows.items(), key=lambda row: (_as_number(row[1][0]), row[0]))
    lines = [
        f"{rank}. {knowledge.label(account_id)}: {number_text(score)}, {label}"
        for rank, (account_id, (score, label)) in enumerate(ranked, start=1)
    ]
    return "Accounts by health score, most at risk first:\n" + "\n".join(lines)


def _label(score) -> str:
    number = _as_number(score)
    return "healthy" if number >= 75 else "needs attention" if number >= 50 else "at risk"


def _as_number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("inf")


def _render(call: PastCall, knowledge: Knowledge, describe_calculation) -> str:
    renderer = _RENDERERS.get(call.name)
    if renderer:
        return renderer(call, knowledge, describe_calculation)
    shown = json.dumps(call.data, ensure_ascii=False, sort_keys=True, default=str)
    return f"{call.name} returned: {shown[:500]}"


def _account_line(record: dict, knowledge: Knowledge) -> str:
    account_id = record.get("id") or record.get("account_id") or ""
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
    who = knowledge.label(account_id) if account_id else str(record.get("name", "An account"))
    return f"{who}: {', '.join(facts)}" if facts else who


def _get_account(call, knowledge, _describe) -> str:
    found = records(call.data)
    return _account_line(found[0], knowledge) + "." if found else "No account was found."


def _list_accounts(call, knowledge, _describe) -> str:
    found = records(call.data)
    if not found:
        return "There are no accounts."
    return f"Accounts ({len(found)}):\n" + "\n".join(f"- {_account_line(r, knowledge)}" for r in found)


def _usage(call, knowledge, _describe) -> str:
    data = call.data if isinstance(call.data, dict) else {}
    account_id = data.get("account_id") or call.arguments.get("account_id", "")
    seats = data.get("monthly_active_seats") or data.get("seats") or []
    trend = data.get("trend_percent", data.get("trend"))
    direction = str(data.get("direction") or "")
    parts = []
    if seats:
        series = ", ".join(number_text(seat) for seat in seats)
        parts.append(
            f"{number_text(seats[-1])} monthly active seats now ({series} over the last {len(seats)} months)"
        )
    if isinstance(trend, (int, float)):
        word = _DIRECTION_WORDS.get(direction, direction) or (
            "growing" if trend > 0 else "declining" if trend < 0 else "flat"
        )
        parts.append(f"trend {trend:+.1f}%, {word}")
    if not parts:
        return f"No usage data for {knowledge.label(account_id)}."
    return f"Usage for {knowledge.label(account_id)}: " + "; ".join(parts) + "."


def _ticket_order(ticket: dict):
    natural = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(ticket.get("id", "")))]
    return str(ticket.get("priority", "P9")), natural


def _tickets(call, knowledge, _describe) -> str:
    data = call.data
    account_id = call.arguments.get("account_id", "")
    tickets = data.get("tickets", []) if isinstance(data, dict) else data
    if isinstance(data, dict):
        account_id = data.get("account_id") or account_id
    tickets = [t for t in tickets or [] if isinstance(t, dict) and t.get("status", "open") == "open"]
    if not tickets:
        return f"{knowledge.label(account_id)} has no open tickets."
    lines = [
        f"- {t.get('id', '?')} [{t.get('priority', '?')}] {t.get('title') or t.get('subject') or ''}".rstrip()
        for t in sorted(tickets, key=_ticket_order)
    ]
    return f"Open tickets for {knowledge.label(account_id)}:\n" + "\n".join(lines)


def _calculator(call, knowledge, describe) -> str:
    data = call.data
    result = data.get("result") if isinstance(data, dict) else data
    expression = str(call.arguments.get("expression", ""))
    meaning = describe(expression) or expression
    return f"{meaning} = {number_text(result)}."


def _knowledge(call, knowledge, _describe) -> str:
    data = call.data
    passages = data.get("passages", data.get("results", [])) if isinstance(data, dict) else data
    query = call.arguments.get("query", "")
    passages = [p for p in passages or [] if isinstance(p, dict)]
    if not passages:
        return f'The knowledge base has nothing on "{query}".'
    lines = []
    for passage in passages:
        text = str(passage.get("text") or passage.get("passage") or passage.get("content") or "")
        summary = sentences(text)[0] if sentences(text) else ""
        title = passage.get("title")
        cite = passage.get("citation") or f"[{passage.get('id', '?')}]"
        lines.append(f"- {title + ': ' if title else ''}{summary} {cite}".replace("  ", " "))
    return f'What the knowledge base says about "{query}":\n' + "\n".join(lines)


def _sent(call, knowledge, _describe) -> str:
    data = call.data if isinstance(call.data, dict) else {}
    to = data.get("to") or call.arguments.get("to", "")
    subject = data.get("subject") or call.arguments.get("subject", "")
    reference = f" ({data['message_id']})" if data.get("message_id") else ""
    return f'Email sent to {to} with the subject "{subject}"{reference}.'


def _deleted(call, knowledge, _describe) -> str:
    data = call.data if isinstance(call.data, dict) else {}
    account_id = data.get("account_id") or call.arguments.get("account_id", "")
    return f"The account {knowledge.label(account_id)} was deleted."


_RENDERERS = {
    RESOLVER: _get_account,
    LISTER: _list_accounts,
    "get_usage_trend": _usage,
    "list_open_tickets": _tickets,
    "calculator": _calculator,
    "search_knowledge": _knowledge,
    "send_email": _sent,
    "delete_account": _deleted,
}


# --- Errors ---------------------------------------------------------------------------------


def _consequence(tool: str) -> str:
    verb = tool.split("_", 1)[0].lower()
    if verb == "send":
        return "nothing was sent"
    if verb in ("delete", "remove"):
        return "nothing was deleted"
    return "it did not run"


def _error(call: PastCall) -> str:
    envelope = call.envelope or {}
    code = str(envelope.get("code") or "error")
    details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
    reason = details.get("reason") or envelope.get("reason")
    # "expired" as its own code: calls recorded before an expiry was told as a denial.
    expired = code == "expired" or (code == "denied" and details.get("decision") == "expired")
    if code == "denied" and not expired:
        line = f"The call to {call.name} was denied by an approver, so {_consequence(call.name)}."
        return line + (f" The approver's reason: {_sentence(reason)}" if reason else "")
    if expired:
        line = (
            f"The approval request for {call.name} expired before anyone decided, "
            f"so {_consequence(call.name)}."
        )
        return line + (f" {_sentence(reason)}" if reason else "")
    if code in _PERMISSION_CODES:
        return f"I am not permitted to use {call.name}."
    return f"{call.name} failed: {envelope.get('error') or code}"


def _sentence(text) -> str:
    text = str(text).strip()
    return text if text.endswith((".", "!", "?")) else text + "."
