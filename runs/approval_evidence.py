"""What a receipt (and an evidence bundle) adds to an approval row for quorum and escalation.

Each key appears only when it says something: "quorum" when more than one approval was needed,
"decisions" when people decided (each with who, the role they decided as, what, how they signed
in, when and why), "escalated_from_role" and "escalated_at" when the request escalated. A
request decided before decisions were recorded (one approver, no escalation) has none of them,
so the receipts sealed before them still match what verification reads now.
"""

from runs.models import ApprovalDecision, ApprovalRequest


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def approval_extras(**approval_filter) -> dict[str, dict]:
    """approval id -> its extra keys, for the approvals matching `approval_filter` (ApprovalRequest
    lookups, e.g. run_id__in=[...])."""
    extras: dict[str, dict] = {}
    routed = (ApprovalRequest.objects.filter(**approval_filter)
              .exclude(quorum=1, escalated_at__isnull=True)
              .values_list("id", "quorum", "escalated_from_role__name", "escalated_at"))
    for id_, quorum, escalated_from, escalated_at in routed:
        entry = extras.setdefault(str(id_), {})
        if quorum > 1:
            entry["quorum"] = quorum
        if escalated_at is not None:
            entry |= {"escalated_from_role": escalated_from, "escalated_at": _iso(escalated_at)}
    decisions = (ApprovalDecision.objects.filter(**{f"approval__{k}": v for k, v in approval_filter.items()})
                 .order_by("approval_id", "created_at", "id")
                 .values_list("approval_id", "username", "role", "decision", "via", "created_at", "reason"))
    for approval_id, username, role, decision, via, at, reason in decisions:
        extras.setdefault(str(approval_id), {}).setdefault("decisions", []).append(
            {"by": username, "role": role, "decision": decision, "via": via, "at": _iso(at), "reason": reason})
    return extras
