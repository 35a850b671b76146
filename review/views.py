"""The dashboard page: the top of the workbench's home (the admin index) for compliance and
governance staff. review/admin.py points the admin's index at review/index.html, which shows
this above the app list; everyone else's index is as it was.

Who sees it: superusers and members of the compliance or governance admin role
(settings.WARRANT["COMPLIANCE_ROLE"], ["GOVERNANCE_ADMIN_ROLE"]); the API answers others 403.
"""

from django.conf import settings

from core.permissions import in_role
from review import charts
from review.charts import Bar, Series
from review.links import Links
from review.figures import (OUTCOMES, PeriodError, dashboard_figures, default_period,
                            period_from)

OUTCOME_CSS = {"succeeded": "rv-ok", "failed": "rv-bad", "blocked": "rv-block", "stopped": "rv-warn",
               "awaiting_approval": "rv-wait", "running": "rv-run", "queued": "rv-queue", "cancelled": "rv-quiet"}
OUTCOME_TEXT = {"awaiting_approval": "awaiting approval"}
DECISION_CSS = {"approved": "rv-ok", "denied": "rv-bad", "expired": "rv-warn", "pending": "rv-wait",
                "cancelled": "rv-quiet"}
TOKENS = (("input_tokens", "rv-c0", "input"), ("output_tokens", "rv-c1", "output"))


def may_see_dashboard(user) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    roles = {settings.WARRANT.get("COMPLIANCE_ROLE"), settings.WARRANT.get("GOVERNANCE_ADMIN_ROLE")} - {None, ""}
    return bool(user.is_superuser or any(in_role(user, role) for role in roles))


def duration(seconds: float | None) -> str:
    """4 min 12 s, 3 h 5 min, 2 d 4 h: a time to decision in words."""
    if seconds is None:
        return "-"
    whole = int(round(seconds))
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s"


def _runs_charts(figures: dict, lk: Links) -> dict:
    runs, period = figures["runs"], lk.period
    days = [d["date"] for d in runs["by_day"]]
    shown = [o for o in OUTCOMES if runs["by_outcome"][o]] or ["succeeded"]
    series = [Series(o, OUTCOME_TEXT.get(o, o), OUTCOME_CSS.get(o, "rv-c0")) for o in shown]
    values = {o: [d["by_outcome"][o] for d in runs["by_day"]] for o in shown}
    outcome = charts.stacked_days(
        "Runs by outcome, per day",
        f"{runs['total']} runs asked for from {period.first} to {period.last}, by outcome: "
        + ", ".join(f"{runs['by_outcome'][o]} {OUTCOME_TEXT.get(o, o)}" for o in shown) + ".",
        days, series, values, href=lambda day, status: lk.runs_on(day, status=status), width=1100)
    risk_series = [Series("tainted", "tainted", "rv-bad"), Series("blocked", "blocked", "rv-block")]
    risk = charts.lines_days(
        "Tainted and blocked runs, per day",
        f"{runs['tainted']} runs tainted by untrusted text and {runs['blocked']} blocked by an intent guard, "
        f"from {period.first} to {period.last}.",
        days, risk_series, {"tainted": [d["tainted"] for d in runs["by_day"]],
                            "blocked": [d["blocked"] for d in runs["by_day"]]},
        href=lambda day, key: lk.runs_on(day, tainted__exact="1") if key == "tainted"
        else lk.runs_on(day, status="blocked"))
    return {"outcome": outcome, "risk": risk}


def _approval_charts(figures: dict, lk: Links) -> dict:
    approvals = figures["approvals"]
    rows = [Bar(decision, n, lk.approvals(status__exact=decision), parts=((DECISION_CSS[decision], n),))
            for decision, n in approvals["by_decision"].items() if n or decision in ("approved", "denied")]
    decision = charts.bars("Approval requests by decision",
                           f"{approvals['total']} approval requests raised in the period: "
                           + ", ".join(f"{r.value} {r.label}" for r in rows) + ".", rows, unit="requests")
    timing_rows = []
    for key, label in (("all", "all decided"), ("approved", "approved"), ("denied", "denied")):
        timing = approvals["time_to_decision"][key]
        for stat, name in (("median_seconds", "median"), ("p90_seconds", "90th percentile")):
            value = timing[stat]
            href = lk.approvals(status__exact=key) if key != "all" else None
            timing_rows.append(Bar(f"{label}, {name}", value or 0, href, text=duration(value),
                                   parts=(("rv-c0" if stat == "median_seconds" else "rv-c1", value or 0),)))
    overall = approvals["time_to_decision"]["all"]
    timing = charts.bars("Time to decision",
                         f"Of {overall['decided']} requests approved or denied, the median wait was "
                         f"{duration(overall['median_seconds'])} and the 90th percentile {duration(overall['p90_seconds'])}.",
                         timing_rows)
    return {"decision": decision, "timing": timing}


def _trace_charts(figures: dict, lk: Links) -> dict:
    events = lk.events
    refused = figures["refused_actions"]
    refused_rows = [Bar(f"{r['tool']} ({r['code']})", r["count"], events("tool_refused", tool=r["tool"], code=r["code"]),
                        note=f"in {r['runs']} run{'s' if r['runs'] != 1 else ''}") for r in refused["by_tool"]]
    fallbacks = figures["model_fallbacks"]
    fallback_rows = [Bar(f"{p['requested']} → {p['answered']}", p["calls"], events("model_call", profile=p["answered"]),
                         note=f"in {p['runs']} run{'s' if p['runs'] != 1 else ''}", parts=(("rv-warn", p["calls"]),))
                     for p in fallbacks["by_profile"]]
    policy_rows = [Bar(p["policy"] or "(unnamed)", p["fired"], _policy_link(p, lk),
                       note="(" + "; ".join(f"{effect} {n}" for effect, n in sorted(p["effects"].items())) + ")",
                       parts=(("rv-c2", p["fired"]),)) for p in figures["policies_fired"]]
    return {
        "refused": charts.bars("Refused tool calls, by tool and reason",
                               f"{refused['total']} tool calls refused by the gate in the period.", refused_rows,
                               unit="refused"),
        "fallbacks": charts.bars("Model fallbacks: profile asked → profile that answered",
                                 f"{fallbacks['calls']} model calls in {fallbacks['runs']} runs were answered by "
                                 "another profile than the one the agent names.", fallback_rows, unit="calls"),
        "policies": charts.bars("Policies that fired most",
                                f"The {len(policy_rows)} policies that fired most in the period: guards, playbooks, "
                                "guidance, formatters and approval requests.", policy_rows, unit="times"),
    }


def _policy_link(policy: dict, lk: Links) -> str | None:
    """The trace's decisions of the policy, or, for a policy that only asked for approvals (or
    for someone who may not open the trace), the approval requests it raised."""
    decided = sum(n for effect, n in policy["effects"].items() if effect != "approval requested")
    if decided and lk.trace:
        return lk.events("policy_decision", policy=policy["policy"])
    if policy["effects"].get("approval requested"):
        return lk.approvals(policy_name=policy["policy"])
    return None


def _token_charts(figures: dict, lk: Links) -> dict:
    def rows(entries: list[dict], name: str, href) -> list[Bar]:
        return [Bar(e[name], e["total_tokens"], href(e[name]), note=f"({e['input_tokens']:,} in, {e['output_tokens']:,} out)",
                    parts=tuple((css, e[key]) for key, css, _ in TOKENS)) for e in entries]

    tokens = figures["tokens"]
    by_agent = rows(tokens["by_agent"], "agent", lambda slug: lk.runs(agent=slug))
    by_role = rows(tokens["by_role"], "role", lk.role_runs)
    return {
        "agent": charts.bars("Tokens by agent", f"Model tokens used by the runs of {len(by_agent)} agents "
                             "(input then output).", by_agent, unit="tokens"),
        "role": charts.bars("Tokens by role", "Model tokens used by runs, by the roles their callers held "
                            "(a caller in two roles counts in both).", by_role, unit="tokens"),
    }


def dashboard_context(request) -> dict:
    """What review/dashboard.html shows: for those who may see it, the period asked for in ?from=&to=
    (the default's last 14 days when left out; a bad date is said and the default shown)."""
    user = request.user
    if not may_see_dashboard(user):
        return {"shown": False}
    error = None
    try:
        period = period_from(request.GET.get("from"), request.GET.get("to"))
    except PeriodError as exc:
        error, period = f"{exc.field}: {exc.message} The last 14 days are shown instead.", default_period()
    figures = dashboard_figures(period)
    lk = Links(user, period)
    charts_ = {**_runs_charts(figures, lk), **_approval_charts(figures, lk), **_trace_charts(figures, lk),
               **_token_charts(figures, lk)}
    approvals = figures["approvals"]
    timing = approvals["time_to_decision"]
    return {
        "shown": True, "error": error, "period": period, "figures": figures, "charts": charts_,
        "events_linked": lk.trace, "lists_linked": lk.lists,
        "timing": [(key, timing[key], duration(timing[key]["median_seconds"]), duration(timing[key]["p90_seconds"]))
                   for key in ("all", "approved", "denied")],
        "outcome_rows": [(OUTCOME_TEXT.get(o, o), figures["runs"]["by_outcome"][o], lk.runs(status=o))
                         for o in OUTCOMES],
        "day_rows": [(d, lk.runs_on(d["date"])) for d in figures["runs"]["by_day"]],
        "links": {"runs": lk.runs(), "tainted": lk.runs(tainted__exact="1"), "blocked": lk.runs(status="blocked"),
                  "approvals": lk.approvals(), "refused": lk.events("tool_refused"),
                  "refused_runs": lk.runs(refused="yes")},
        "api_url": f"/api/v1/dashboard/summary/?created_after={period.first}&created_before={period.end.date()}",
    }
