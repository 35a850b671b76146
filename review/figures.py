"""The dashboard's figures for a period: one function, used by the workbench's home page and the API.

Each figure counts what happened in the period, by the time of its own record: runs asked for
(Run.created_at), approval requests raised (ApprovalRequest.created_at), trace events written
(RunEvent.created_at: refused tool calls, policy decisions, model calls answered by another
profile than the one the run asked for). A period is whole days in UTC, both ends included.

The figures take a fixed number of statements, whatever the number of runs (STATEMENTS): each is
a GROUP BY over the period, except the decided approvals' times to decision, which are read as
one column (a median and a 90th percentile need the values; no portable SQL aggregate gives them).
"""

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncDate
from django.db.models.lookups import Contains
from django.utils import timezone

from review.models import ReviewItem
from runs import outcome_refusals
from runs.models import ApprovalRequest, Run, RunEvent
from runs.states import RunStatus

DEFAULT_DAYS = 14
MAX_DAYS = 366
TOP_POLICIES = 10
# The statements dashboard_figures() runs (tests/review/test_figures.py counts them).
STATEMENTS = 8
OUTCOMES = [s.value for s in RunStatus]
DECISIONS = [s.value for s in ApprovalRequest.Status]
NO_ROLE = "(no role)"
REVIEW_STATES = ["unassigned", "assigned", "signed_off", "finding_open", "resolved"]
REVIEWED = ("signed_off", "finding_open", "resolved")


class PeriodError(ValueError):
    """A period that cannot be shown; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Period:
    first: date  # the first day shown
    last: date  # the last day shown, included

    @property
    def start(self) -> datetime:
        return datetime.combine(self.first, time.min, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Midnight after the last day: excluded."""
        return datetime.combine(self.last + timedelta(days=1), time.min, tzinfo=UTC)

    @property
    def days(self) -> list[date]:
        return [self.first + timedelta(days=n) for n in range((self.last - self.first).days + 1)]


def default_period(today: date | None = None) -> Period:
    """The last DEFAULT_DAYS days, today included."""
    today = today or timezone.now().astimezone(UTC).date()
    return Period(today - timedelta(days=DEFAULT_DAYS - 1), today)


def _day(field: str, value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise PeriodError(field, "Give a date as YYYY-MM-DD.") from None


def period_from(first: str | None, last: str | None, *, first_name: str = "from", last_name: str = "to",
                last_excluded: bool = False, today: date | None = None) -> Period:
    """The period two query parameters ask for. Both left out (None or ""): the default period;
    one left out: DEFAULT_DAYS days from or up to the other. With last_excluded the second date is
    the day after the period (the API's created_before, as its other filters take it)."""
    if not first and not last:
        return default_period(today)
    try:
        end = _day(last_name, last) - timedelta(days=1 if last_excluded else 0) if last else None
        start = _day(first_name, first) if first else end - timedelta(days=DEFAULT_DAYS - 1)
        end = end if end is not None else start + timedelta(days=DEFAULT_DAYS - 1)
        Period(start, end).end  # the midnight after the last day exists
    except OverflowError:
        raise PeriodError(last_name if last else first_name, "The period runs off the calendar.") from None
    if end < start:
        raise PeriodError(last_name, "The period ends before it starts.")
    if (end - start).days + 1 > MAX_DAYS:
        raise PeriodError(last_name, f"A period is at most {MAX_DAYS} days.")
    return Period(start, end)


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between the closest ranks (PostgreSQL's percentile_cont); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _timing(seconds: list[float]) -> dict:
    median, p90 = percentile(seconds, 0.5), percentile(seconds, 0.9)
    return {"decided": len(seconds), "median_seconds": None if median is None else round(median, 3),
            "p90_seconds": None if p90 is None else round(p90, 3)}


def _refused_counts() -> dict:
    """Runs refused any action, and refused one of each kind, counted in the GROUP BY's own statement.
    The kinds are a JSON list of known words, so its text holds '"denied"' exactly when it does
    (runs.outcome_refusals; SQLite has no JSON containment)."""
    kinds = Cast("refused_kinds", TextField())
    return {"refused": Count("id", filter=Q(refused_count__gt=0))} | {
        f"refused_{kind}": Count("id", filter=Q(refused_count__gt=0) & Contains(kinds, Value(f'"{kind}"')))
        for kind in outcome_refusals.KINDS}


def _runs(period: Period) -> dict:
    rows = (Run.objects.filter(created_at__gte=period.start, created_at__lt=period.end)
            .annotate(day=TruncDate("created_at", tzinfo=UTC)).order_by()
            .values("day", "status", "tainted").annotate(n=Count("id"), **_refused_counts()))
    refused = {"total": 0, "by_kind": dict.fromkeys(outcome_refusals.KINDS, 0)}
    by_day = {day: {"date": day.isoformat(), "total": 0, "by_outcome": dict.fromkeys(OUTCOMES, 0), "tainted": 0,
                    "blocked": 0} for day in period.days}
    for row in rows:
        day = by_day[row["day"]]
        day["total"] += row["n"]
        day["by_outcome"][row["status"]] = day["by_outcome"].get(row["status"], 0) + row["n"]
        day["tainted"] += row["n"] if row["tainted"] else 0
        day["blocked"] += row["n"] if row["status"] == RunStatus.BLOCKED else 0
        refused["total"] += row["refused"]
        for kind in outcome_refusals.KINDS:
            refused["by_kind"][kind] += row[f"refused_{kind}"]
    days = list(by_day.values())
    totals = {outcome: sum(d["by_outcome"][outcome] for d in days) for outcome in OUTCOMES}
    return {"total": sum(d["total"] for d in days), "by_outcome": totals,
            "tainted": sum(d["tainted"] for d in days), "blocked": sum(d["blocked"] for d in days),
            "refused": refused, "by_day": days}


def _approvals(period: Period) -> tuple[dict, list[dict]]:
    asked = ApprovalRequest.objects.filter(created_at__gte=period.start, created_at__lt=period.end).order_by()
    by_decision, by_policy = dict.fromkeys(DECISIONS, 0), {}
    for row in asked.values("status", "policy_id", "policy_name").annotate(n=Count("id")):
        by_decision[row["status"]] = by_decision.get(row["status"], 0) + row["n"]
        if row["policy_name"]:
            key = (row["policy_id"], row["policy_name"])
            by_policy[key] = by_policy.get(key, 0) + row["n"]
    waited = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
    seconds = {"approved": [], "denied": []}
    decided = asked.filter(status__in=list(seconds), decided_at__isnull=False).annotate(waited=waited)
    for status, span in decided.values_list("status", "waited"):
        seconds[status].append(span.total_seconds())
    timing = {"all": _timing(seconds["approved"] + seconds["denied"])} | {s: _timing(v) for s, v in seconds.items()}
    approvals = {"total": sum(by_decision.values()), "by_decision": by_decision, "time_to_decision": timing}
    return approvals, [{"policy_id": pid, "policy": name, "effect": "approval requested", "fired": n}
                       for (pid, name), n in by_policy.items()]


def _events(period: Period) -> tuple[dict, list[dict]]:
    """Refused tool calls and policy decisions, in one GROUP BY over the trace."""
    rows = (RunEvent.objects.filter(created_at__gte=period.start, created_at__lt=period.end,
                                    kind__in=["tool_refused", "policy_decision"]).order_by()
            .values("kind", tool=KT("data__tool"), code=KT("data__code"), policy=KT("data__policy"),
                    policy_id=KT("data__policy_id"), effect=KT("data__effect"))
            .annotate(n=Count("id"), runs=Count("run_id", distinct=True)))
    refused, decisions = [], []
    for row in rows:
        if row["kind"] == "tool_refused":
            refused.append({"tool": row["tool"] or "", "code": row["code"] or "", "count": row["n"], "runs": row["runs"]})
        else:
            decisions.append({"policy_id": _int(row["policy_id"]), "policy": row["policy"] or "",
                              "effect": row["effect"] or "", "fired": row["n"]})
    refused.sort(key=lambda r: (-r["count"], r["tool"], r["code"]))
    return {"total": sum(r["count"] for r in refused), "by_tool": refused}, decisions


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(key_path: str) -> Cast:
    """A JSON key's value as text, which compares as text (a bare KT's lookups are the JSON key's)."""
    return Cast(KT(key_path), output_field=TextField())


def _fallbacks(period: Period) -> dict:
    """Model calls a profile answered other than the one the run's agent version froze (as
    runs.model_answer reads a run's state): by the pair asked and answered, and the runs."""
    calls = (RunEvent.objects.filter(created_at__gte=period.start, created_at__lt=period.end, kind="model_call",
                                     ).exclude(data__backend=None).order_by()
             .annotate(frozen=F("run__snapshot"))
             .annotate(asked=_text("frozen__agent__model_profile__name"), answered=_text("data__profile"))
             .filter(asked__gt="").exclude(answered=F("asked")))
    pairs = [{"requested": row["asked"], "answered": row["answered"] or "", "calls": row["n"], "runs": row["runs"]}
             for row in calls.values("asked", "answered").annotate(n=Count("id"), runs=Count("run_id", distinct=True))]
    pairs.sort(key=lambda p: (-p["calls"], p["requested"], p["answered"]))
    runs = calls.aggregate(runs=Count("run_id", distinct=True))["runs"]
    return {"runs": runs, "calls": sum(p["calls"] for p in pairs), "by_profile": pairs}


def _tokens(period: Period) -> dict:
    """By agent, and by role as the run froze its caller's roles (a run of a caller in two roles
    counts in each: the roles' figures may add up to more than the agents')."""
    rows = (Run.objects.filter(created_at__gte=period.start, created_at__lt=period.end).order_by()
            .values("agent__slug", "caller_roles")
            .annotate(runs=Count("id"), input=Sum("input_tokens"), output=Sum("output_tokens")))
    agents, roles = {}, {}
    for row in rows:
        for table, key in [(agents, row["agent__slug"]), *((roles, r) for r in (row["caller_roles"] or [NO_ROLE]))]:
            entry = table.setdefault(key, {"runs": 0, "input_tokens": 0, "output_tokens": 0})
            entry["runs"] += row["runs"]
            entry["input_tokens"] += row["input"] or 0
            entry["output_tokens"] += row["output"] or 0

    def listed(table: dict, name: str) -> list[dict]:
        rows = [{name: key, **entry, "total_tokens": entry["input_tokens"] + entry["output_tokens"]}
                for key, entry in table.items()]
        return sorted(rows, key=lambda r: (-r["total_tokens"], r[name]))

    return {"by_agent": listed(agents, "agent"), "by_role": listed(roles, "role")}


def _policies(decisions: list[dict], approvals: list[dict]) -> list[dict]:
    merged: dict[tuple, dict] = {}
    for row in decisions + approvals:
        entry = merged.setdefault((row["policy_id"], row["policy"]), {
            "policy_id": row["policy_id"], "policy": row["policy"], "fired": 0, "effects": {}})
        entry["fired"] += row["fired"]
        entry["effects"][row["effect"]] = entry["effects"].get(row["effect"], 0) + row["fired"]
    ranked = sorted(merged.values(), key=lambda p: (-p["fired"], p["policy"]))
    return ranked[:TOP_POLICIES]


def _review(period: Period) -> dict:
    """Runs sampled for review in the period, by where their review stands; open findings now, of any period."""
    in_period = Q(sampled_at__gte=period.start, sampled_at__lt=period.end)
    counts = ReviewItem.objects.aggregate(
        open_findings=Count("id", filter=Q(state="finding_open")),
        **{state: Count("id", filter=in_period & Q(state=state)) for state in REVIEW_STATES})
    by_state = {state: counts[state] for state in REVIEW_STATES}
    sampled, reviewed = sum(by_state.values()), sum(by_state[s] for s in REVIEWED)
    detail = (f"{reviewed} of {sampled} sampled runs reviewed" if sampled else "No run was sampled for review in "
              "the period") + f"; {counts['open_findings']} open finding(s) now."
    return {"available": bool(sampled or counts["open_findings"]), "detail": detail, "sampled": sampled,
            "reviewed": reviewed, "coverage": round(reviewed / sampled, 4) if sampled else None, "by_state": by_state,
            "open_findings": counts["open_findings"]}


def dashboard_figures(period: Period) -> dict:
    """Every figure of the dashboard for the period, as the API answers it (STATEMENTS statements)."""
    approvals, approval_policies = _approvals(period)
    refused, decisions = _events(period)
    return {
        "period": {"from": period.first.isoformat(), "to": period.last.isoformat(), "days": len(period.days)},
        "runs": _runs(period),
        "approvals": approvals,
        "refused_actions": refused,
        "model_fallbacks": _fallbacks(period),
        "tokens": _tokens(period),
        "policies_fired": _policies(decisions, approval_policies),
        "review_coverage": _review(period),
    }

