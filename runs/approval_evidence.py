"""What a receipt (and an evidence bundle) adds to an approval row for quorum and escalation.

Each key appears only when it says something: "quorum" when more than one approval was needed,
"decisions" when people decided (each with who, the role they decided as, what, how they signed
in, when and why), "escalated_from_role" and "escalated_at" when the request escalated. A
request decided before decisions were recorded (one approver, no escalation) has none of them,
so the receipts sealed before them still match what verification reads now.
"""

from runs.models import ApprovalRequest


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


# What a request adds, read with its decisions (a request no one decided comes once, with none),
# in the order the decisions were made: add_extras folds one such row into the request's keys.
EXTRA_COLUMNS = ("quorum", "escalated_from_role__name", "escalated_at", "decisions__username", "decisions__role",
                 "decisions__decision", "decisions__via", "decisions__created_at", "decisions__reason")
DECISION_ORDER = ("decisions__created_at", "decisions__id")


def add_extras(extras: dict, id_: str, quorum, escalated_from, escalated_at, username, role, decision, via, at,
               reason) -> None:
    """Fold one row of EXTRA_COLUMNS (for request `id_`) into extras[id_]; a request's rows repeat
    its quorum and escalation, which are set, not added."""
    if quorum > 1:
        extras.setdefault(id_, {})["quorum"] = quorum
    if escalated_at is not None:
        extras.setdefault(id_, {}).update(escalated_from_role=escalated_from, escalated_at=_iso(escalated_at))
    if decision is not None:
        extras.setdefault(id_, {}).setdefault("decisions", []).append(
            {"by": username, "role": role, "decision": decision, "via": via, "at": _iso(at), "reason": reason})


def approval_extras(**approval_filter) -> dict[str, dict]:
    """approval id -> its extra keys, for the approvals matching `approval_filter` (ApprovalRequest
    lookups, e.g. run_id__in=[...]), in one statement."""
    extras: dict[str, dict] = {}
    rows = (ApprovalRequest.objects.filter(**approval_filter).order_by("id", *DECISION_ORDER)
            .values_list("id", *EXTRA_COLUMNS))
    for id_, *row in rows:
        add_extras(extras, str(id_), *row)
    return extras
