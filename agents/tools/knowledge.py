"""A small local knowledge base and a search over it that a model can cite by passage id.

Scoring is plain whole-word overlap between the query and a passage (title words count double), so
results are explainable and identical on every run; ties go to the lower id.
"""

import re

from agents.tools.envelopes import ToolContext, ToolError

PASSAGES = [
    {
        "id": "kb-renewals-1",
        "title": "Renewals policy",
        "text": (
            "The account owner opens the renewal conversation 90 days before the renewal date and "
            "confirms seat counts and plan 60 days before. Renewals above 100000 ARR need a "
            "written success review attached to the renewal record."
        ),
    },
    {
        "id": "kb-renewals-2",
        "title": "Renewal pricing",
        "text": (
            "Renewals keep the current price when usage is flat or growing. A plan change at "
            "renewal takes effect on the renewal date, never mid-term. Multi-year renewals are "
            "offered only to accounts whose health score is healthy."
        ),
    },
    {
        "id": "kb-sla-1",
        "title": "Incident SLA for P1 tickets",
        "text": (
            "A P1 incident is an outage or data loss affecting production. Support acknowledges a "
            "P1 within 1 hour, posts an update at least every 2 hours until resolved, and the "
            "account owner tells the customer personally. P2 tickets are acknowledged within 4 "
            "business hours, P3 within 2 business days."
        ),
    },
    {
        "id": "kb-churn-1",
        "title": "Churn signals",
        "text": (
            "The strongest churn signals are monthly active seats falling for three months, an NPS "
            "below 30, and an open P1 incident. An account with a health score under 50 is at risk "
            "and its owner must file a churn-risk plan within five business days."
        ),
    },
    {
        "id": "kb-churn-2",
        "title": "Churn-risk playbook",
        "text": (
            "For an at-risk account: resolve open P1 and P2 tickets first, book an executive "
            "sponsor call, agree a usage recovery plan with dated milestones, and review the "
            "health score every two weeks until it reaches 75."
        ),
    },
    {
        "id": "kb-email-1",
        "title": "Customer email etiquette",
        "text": (
            "Customer emails have a specific subject line, name the account and the next step, and "
            "are signed by the account owner. Never quote internal health scores, other customers "
            "or unapproved discounts in an email. Sending any email needs SecOps approval in Warrant."
        ),
    },
    {
        "id": "kb-retention-1",
        "title": "Data retention and account deletion",
        "text": (
            "Customer data is kept for the life of the contract plus 30 days. Deleting an account "
            "is irreversible and removes its tickets; it needs SecOps approval and a written "
            "request from the customer or from legal."
        ),
    },
    {
        "id": "kb-discounts-1",
        "title": "Discount approvals",
        "text": (
            "Account owners may offer up to 10% discount on a renewal. Discounts from 10% to 20% "
            "need the sales director; anything above 20% needs the CFO. Discounts are never "
            "promised in writing before approval."
        ),
    },
    {
        "id": "kb-health-1",
        "title": "How the health score works",
        "text": (
            "The health score starts at 100, subtracts 15 per open P1, 6 per P2 and 2 per P3 "
            "ticket, adds the seat trend times 0.8 capped at 15 either way, adds (NPS - 30) times "
            "0.2 and subtracts 10. 75 and above is healthy, 50 to 74 needs attention, below 50 is "
            "at risk."
        ),
    },
]

TOP_K = 3
TITLE_WEIGHT = 2
_STOPWORDS = frozenset(
    """a about an and are as at be by can do does for from have how i in is it its me my of on or
    our say says should tell that the their there this to us was we what when where which who why
    will with you your knowledge base kb please""".split()
)


def _terms(text: str) -> set[str]:
    terms = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOPWORDS:
            continue
        # Fold a plain plural so "renewals" finds "renewal"; both sides go through the same rule.
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        terms.add(word)
    return terms


_INDEX = [(passage, _terms(passage["title"]), _terms(passage["text"])) for passage in PASSAGES]


def search(query: str, *, limit: int = TOP_K) -> list[dict]:
    """The best passages for a query, best first; passages sharing no word with it are left out."""
    wanted = _terms(query)
    scored = []
    for passage, title_terms, text_terms in _INDEX:
        score = TITLE_WEIGHT * len(wanted & title_terms) + len(wanted & text_terms)
        if score:
            scored.append((-score, passage["id"], passage))
    scored.sort(key=lambda row: row[:2])
    return [{"id": p["id"], "title": p["title"], "text": p["text"]} for _, _, p in scored[:limit]]


def search_knowledge(args: dict, ctx: ToolContext) -> dict:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("invalid_arguments", "Give a few words to search for.")
    return {"query": query, "passages": search(query)}
