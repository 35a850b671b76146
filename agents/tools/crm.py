"""The demo CRM tools. Read tools answer from the CRM tables; send_email and delete_account change them.

The health-score arithmetic is kept in pure functions (`usage_trend_percent`, `health_score`) so it
can be checked without a database. It uses Decimal throughout: the demo's numbers must come out the
same on every machine, and float rounding (or Python's round-half-to-even) would move them.
"""

import re
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal

from django.db import transaction

from agents.models import CrmAccount, CrmTicket, SentEmail
from agents.tools.envelopes import ToolContext, ToolError

PRIORITY_PENALTY = {"P1": 15, "P2": 6, "P3": 2}
TREND_WEIGHT = Decimal("0.8")
TREND_CAP = Decimal("15")
NPS_NEUTRAL = 30
NPS_WEIGHT = Decimal("0.2")
BASELINE_ADJUSTMENT = -10
# A change smaller than this, either way, is noise in seat counts rather than a trend.
FLAT_BAND = Decimal("1.0")

ACCOUNT_ID_RE = re.compile(r"^A-[0-9]+$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


# --- Pure arithmetic ------------------------------------------------------------------------


def _half_up(value: Decimal, places: str = "1") -> Decimal:
    return value.quantize(Decimal(places), rounding=ROUND_HALF_UP)


def usage_trend_percent(seats: Sequence[int]) -> Decimal:
    """Mean of the last three months against the three before, in percent, to one decimal."""
    recent, before = list(seats[-3:]), list(seats[-6:-3])
    if not before or len(recent) < 3:
        return Decimal("0.0")
    # Both windows hold three months, so the ratio of the sums is the ratio of the means.
    before_sum, recent_sum = Decimal(sum(before)), Decimal(sum(recent))
    if before_sum == 0:
        return Decimal("0.0") if recent_sum == 0 else Decimal("100.0")
    return _half_up((recent_sum - before_sum) * 100 / before_sum, "0.1")


def trend_direction(trend_percent: Decimal) -> str:
    if trend_percent >= FLAT_BAND:
        return "up"
    if trend_percent <= -FLAT_BAND:
        return "down"
    return "flat"


def health_label(score: int) -> str:
    if score >= 75:
        return "healthy"
    if score >= 50:
        return "needs attention"
    return "at risk"


def health_score(*, open_priorities: Iterable[str], trend_percent: Decimal, nps: int) -> dict:
    """The docs/design.md formula, with every component it adds up, so an answer can explain itself."""
    priorities = list(open_priorities)
    counts = {priority: priorities.count(priority) for priority in PRIORITY_PENALTY}
    ticket_penalty = sum(PRIORITY_PENALTY.get(priority, 0) for priority in priorities)
    trend_percent = _half_up(Decimal(str(trend_percent)), "0.1")
    trend_adjustment = max(-TREND_CAP, min(TREND_CAP, trend_percent * TREND_WEIGHT))
    nps_adjustment = (nps - NPS_NEUTRAL) * NPS_WEIGHT
    raw = 100 - ticket_penalty + trend_adjustment + nps_adjustment + BASELINE_ADJUSTMENT
    score = max(0, min(100, int(_half_up(raw))))
    return {
        "score": score,
        "label": health_label(score),
        "components": {
            "open_tickets": counts,
            "ticket_penalty": -ticket_penalty,
            "trend_percent": float(trend_percent),
            "trend_adjustment": float(trend_adjustment),
            "nps": nps,
            "nps_adjustment": float(nps_adjustment),
            "baseline_adjustment": BASELINE_ADJUSTMENT,
            "raw_score": float(raw),
        },
    }


# --- Lookups --------------------------------------------------------------------------------


def _natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _iso(value) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _account_by_id(account_id) -> CrmAccount:
    normalized = str(account_id or "").strip().upper()
    if not ACCOUNT_ID_RE.match(normalized):
        raise ToolError("invalid_arguments", f"{account_id!r} is not an account id like 'A-100'.")
    account = CrmAccount.objects.filter(account_id=normalized).first()
    if account is None:
        raise ToolError("not_found", f"There is no account {normalized}.")
    return account


def _account_by_query(query: str) -> CrmAccount:
    query = " ".join(query.split())
    # "Acme's" and "Acme’s" mean Acme; try the query as written first in case a name ends that way.
    attempts = [query, re.sub(r"['’]s?$", "", query)]
    accounts = list(CrmAccount.objects.all())
    rules = (
        lambda account, key: account.account_id.casefold() == key,
        lambda account, key: account.name.casefold() == key,
        lambda account, key: account.name.casefold().startswith(key),
        lambda account, key: key in account.name.casefold(),
    )
    for attempt in dict.fromkeys(attempts):
        key = attempt.strip(" .,;:!?\"").casefold()
        if not key:
            continue
        for rule in rules:
            hits = [account for account in accounts if rule(account, key)]
            if len(hits) == 1:
                return hits[0]
            if hits:
                names = ", ".join(f"{account.account_id} {account.name}" for account in hits)
                raise ToolError("not_found", f"{query!r} matches more than one account ({names}); use an id.")
    raise ToolError("not_found", f"No account matches {query!r}.")


def _summary(account: CrmAccount) -> dict:
    return {
        "id": account.account_id,
        "name": account.name,
        "plan": account.plan,
        "arr": account.arr,
        "renewal_date": _iso(account.renewal_date),
        "owner": account.owner,
    }


def _open_priorities(account: CrmAccount) -> list[str]:
    return list(account.tickets.filter(status="open").values_list("priority", flat=True))


# --- Read tools -----------------------------------------------------------------------------


def list_accounts(args: dict, ctx: ToolContext) -> list:
    return [_summary(account) for account in CrmAccount.objects.order_by("account_id")]


def get_account(args: dict, ctx: ToolContext) -> dict:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("invalid_arguments", "Give an account id or name to look up.")
    account = _account_by_query(query)
    return {**_summary(account), "nps": account.nps}


def get_usage_trend(args: dict, ctx: ToolContext) -> dict:
    account = _account_by_id(args.get("account_id"))
    trend = usage_trend_percent(account.monthly_active_seats)
    return {
        "account_id": account.account_id,
        "name": account.name,
        "monthly_active_seats": list(account.monthly_active_seats),
        "trend_percent": float(trend),
        "direction": trend_direction(trend),
    }


def list_open_tickets(args: dict, ctx: ToolContext) -> dict:
    account = _account_by_id(args.get("account_id"))
    tickets = sorted(
        account.tickets.filter(status="open"),
        key=lambda ticket: (_natural_key(ticket.priority), _natural_key(ticket.ticket_id)),
    )
    return {
        "account_id": account.account_id,
        "name": account.name,
        "tickets": [
            {"id": ticket.ticket_id, "priority": ticket.priority, "title": ticket.title} for ticket in tickets
        ],
    }


def compute_health_score(args: dict, ctx: ToolContext) -> dict:
    account = _account_by_id(args.get("account_id"))
    result = health_score(
        open_priorities=_open_priorities(account),
        trend_percent=usage_trend_percent(account.monthly_active_seats),
        nps=account.nps,
    )
    return {"account_id": account.account_id, "name": account.name, **result}


# --- Side effects ---------------------------------------------------------------------------


def send_email(args: dict, ctx: ToolContext) -> dict:
    key = (ctx.idempotency_key or "").strip()
    if not key:
        raise ToolError("idempotency_key_required", "send_email runs only with an idempotency key.")
    if len(key) > SentEmail._meta.get_field("idempotency_key").max_length:
        raise ToolError("invalid_arguments", "The idempotency key is too long.")
    to = str(args.get("to") or "").strip()
    subject = str(args.get("subject") or "").strip()
    body = str(args.get("body") or "")
    if not EMAIL_RE.match(to) or len(to) > 254:
        raise ToolError("invalid_arguments", f"{to!r} is not an email address.")
    if not subject or len(subject) > 255:
        raise ToolError("invalid_arguments", "The subject must be 1 to 255 characters.")
    if not body.strip():
        raise ToolError("invalid_arguments", "The body is empty.")

    # The key is unique in the table, so a retried or replayed call finds the first send
    # instead of sending again, even when two workers race.
    email, created = SentEmail.objects.get_or_create(
        idempotency_key=key, defaults={"to": to, "subject": subject, "body": body}
    )
    if not created and (email.to, email.subject, email.body) != (to, subject, body):
        raise ToolError("idempotency_conflict", "This idempotency key already sent a different email.")
    return {
        "message_id": f"msg-{email.pk}",
        "to": email.to,
        "subject": email.subject,
        "status": "sent",
        "sent_at": _iso(email.sent_at),
    }


# The outbox may send it again under the same key after a worker died mid-call (runs.outbox): the
# key's unique row makes the second send find the first, so it is safe.
send_email.honours_idempotency_key = True


def delete_account(args: dict, ctx: ToolContext) -> dict:
    with transaction.atomic():
        account = _account_by_id(args.get("account_id"))
        _, deleted = CrmAccount.objects.filter(pk=account.pk).delete()
        # Someone else may have deleted it between the read and the delete.
        if not deleted.get(CrmAccount._meta.label):
            raise ToolError("not_found", f"There is no account {account.account_id}.")
    return {
        "account_id": account.account_id,
        "name": account.name,
        "deleted": True,
        "tickets_deleted": deleted.get(CrmTicket._meta.label, 0),
    }
