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


def approval_extras(**approval_filter) -> dict[str, dict]:
    """approval id -> its extra keys, for the approvals matching `approval_filter` (ApprovalRequest
    lookups, e.g. run_id__in=[...])."""
    extras: dict[str, dict] = {}
    # One statement: each request with its decisions (a request no one decided comes once, with
    # none), in the order they were made.
    rows = (ApprovalRequest.objects.filter(**approval_filter).order_by("id", "decisions__created_at", "decisions__id")
            .values_list("id", "quorum", "escalated_from_role__name", "escalated_at", "decisions__username",
                         "decisions__role", "decisions__decision", "decisions__via", "decisions__created_at",
                         "decisions__reason"))
    for id_, quorum, escalated_from, escalated_at, username, role, decision, via, at, reason in rows:
        if quorum > 1:
            extras.setdefault(str(id_), {})["quorum"] = quorum
        if escalated_at is not None:
            extras.setdefault(str(id_), {}).update(escalated_from_role=escalated_from, escalated_at=_iso(escalated_at))
        if decision is not None:
            extras.setdefault(str(id_), {}).setdefault("decisions", []).append(
                {"by": username, "role": role, "decision": decision, "via": via, "at": _iso(at), "reason": reason})
    return extras
