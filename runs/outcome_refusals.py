"""What a run was refused: the actions it set out to take and did not, because someone or
something said no. A run that "succeeded" after its delete was denied did not do everything it
set out to do, and every place that shows its outcome says so (issue #20 item 6).

Read from the run's state: every tool call ends as an envelope in a tool message
(runs.tool_batch), so a refused call's code, reason and approval are there as the model read
them. Kinds:

  denied           a person denied the call's approval request
  expired          its request expired before a decision (it counts as denied, and is told apart)
  refused_at_call  the gate or the live registry refused it when it was to run: a grant revoked
                   (also while the call waited for approval), a skill that does not allow it, the
                   run's approval requests used up, a tool held or changed at its source
  tool_cap         the call was over its tool's cap for one run
  budget_denied    the run asked for more budget and the request was denied or expired

Not refusals: a call the model got wrong (an unknown tool, arguments that break the schema) is
the model's mistake, answered so it can repair it; a tool that failed, timed out or could not be
reached did not refuse anything (tool_unavailable is also the code of an outage, so it is left out).
A call cancelled with its run was not refused either: the run's status says cancelled.

`refusals` is pure; `budget_refusals` reads the run's budget requests.
"""

import json

from django.db.models import TextField
from django.db.models.functions import Cast

from runs.models import ApprovalRequest

DENIED, EXPIRED, REFUSED_AT_CALL, TOOL_CAP, BUDGET_DENIED = (
    "denied", "expired", "refused_at_call", "tool_cap", "budget_denied")
KINDS = (DENIED, EXPIRED, REFUSED_AT_CALL, TOOL_CAP, BUDGET_DENIED)

# Envelope codes of calls refused when they were to run, from governance.gate and the dispatcher.
_AT_CALL = frozenset({"not_permitted", "approval_limit", "tool_held", "tool_changed"})
_MOST = 32767  # Run.refused_count is a small integer


def _envelope(message: dict) -> dict | None:
    try:
        envelope = json.loads(message.get("content") or "")
    except (TypeError, ValueError):
        return None
    return envelope if isinstance(envelope, dict) and envelope.get("ok") is False else None


def _kind(envelope: dict) -> str | None:
    code = envelope.get("code")
    if code == "denied":
        details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
        return EXPIRED if details.get("decision") == "expired" else DENIED
    if code == TOOL_CAP:
        return TOOL_CAP
    return REFUSED_AT_CALL if code in _AT_CALL else None


def refusals(state: dict, budget: list[dict] = ()) -> list[dict]:
    """Each refused action of the run, in the order it happened: call_id, tool, kind, code, reason
    and the approval request that decided it (None when none did). `budget`: refused budget
    requests, as budget_refusals returns them, added last."""
    found = []
    for message in state.get("messages", []):
        if message.get("role") != "tool" or (envelope := _envelope(message)) is None:
            continue
        if (kind := _kind(envelope)) is None:
            continue
        details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
        # A denial's reason is the approver's words when they gave some; else what the model was told.
        reason = details.get("reason") or envelope.get("error") or ""
        found.append({"call_id": message.get("tool_call_id", ""), "tool": message.get("name", ""), "kind": kind,
                      "code": envelope.get("code", ""), "reason": reason, "approval_id": details.get("approval_id")})
    return found + list(budget)


def summary(found: list[dict]) -> dict:
    """The two columns a run's end writes: how many actions were refused, and their kinds, sorted."""
    return {"refused_count": min(len(found), _MOST), "refused_kinds": sorted({r["kind"] for r in found})}


def outcome(status: str, found: list[dict]) -> dict:
    """The receipt's outcome summary: did the run do all it set out to do?"""
    columns = summary(found)
    return {"status": status, "refused": columns["refused_count"], "refused_kinds": columns["refused_kinds"],
            "complete": status == "succeeded" and not found}


def label(status: str, count: int) -> str:
    """'succeeded · 1 refused': the words every list and badge shows."""
    return f"{status} · {count} refused" if count else status


def budget_refusals(run) -> list[dict]:
    """The run's budget requests that were denied or expired. A run that never asked for more
    budget has none (RunState.budget_asks counts every ask, and came with them), so it costs no
    query: a run parked only for its tool calls is the common case."""
    if not (run.state or {}).get("budget_asks"):
        return []
    rows = (ApprovalRequest.objects.filter(run_id=run.pk, kind=ApprovalRequest.Kind.BUDGET,
                                           status__in=[ApprovalRequest.Status.DENIED, ApprovalRequest.Status.EXPIRED])
            .order_by("created_at", "id").values_list("id", "call_id", "status", "reason"))
    return [{"call_id": call_id, "tool": "", "kind": BUDGET_DENIED, "code": status, "reason": reason,
             "approval_id": str(id_)} for id_, call_id, status, reason in rows]


def of_run(run, state: dict | None = None) -> list[dict]:
    """Every refusal of `run`, reading `state` (the run's new state, when its end is being written)."""
    return refusals(run.state if state is None else state, budget_refusals(run))


# --- the lists' filters (the API's and the workbench's) ---------------------------------------


def filter_refused(queryset, name: str, value: bool | None):
    """Runs with (True) or without (False) a refused action."""
    if value is None:
        return queryset
    return queryset.filter(refused_count__gt=0) if value else queryset.filter(refused_count=0)


def filter_refused_kind(queryset, name: str, value: str, *, prefix: str = ""):
    """Runs refused an action of kind `value`. The kinds are a JSON list of known words: its text
    holds '"denied"' exactly when the list does (SQLite has no JSON containment; this reads the same
    on PostgreSQL). refused_count > 0 first, so the index narrows it. `prefix`: the path to the run
    ("run__" from a receipt)."""
    if not value:
        return queryset
    return (queryset.filter(**{f"{prefix}refused_count__gt": 0})
            .annotate(_refused_kinds_text=Cast(f"{prefix}refused_kinds", TextField()))
            .filter(_refused_kinds_text__contains=f'"{value}"'))
