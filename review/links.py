"""The list behind each figure: the workbench's admin changelists, with the query filters they take.

The run list takes status, agent, tainted, the creation date (created_at__gte/__lt, as its date
filter writes them) and any lookup on its own fields (caller_roles__icontains); the approval list
status, policy_name and the date; the trace's event list kind and keys of an event's data
(data__tool=...), for those who may read it (runs.view_runevent: superusers, or a role given it).
"""

from datetime import date
from urllib.parse import urlencode

from django.urls import reverse

from review.figures import NO_ROLE, Period


def _bound(moment) -> str:
    return str(moment)  # "2026-11-18 00:00:00+00:00", as the admin's own date filter writes it


def changelist(model: str, period: Period, **filters) -> str:
    query = {"created_at__gte": _bound(period.start), "created_at__lt": _bound(period.end), **filters}
    return f"{reverse(f'admin:runs_{model}_changelist')}?{urlencode(query)}"


def one_day(day: str) -> Period:
    first = date.fromisoformat(day)
    return Period(first, first)


def runs(period: Period, **filters) -> str:
    return changelist("run", period, **filters)


def runs_on(day: str, **filters) -> str:
    return runs(one_day(day), **filters)


def role_runs(period: Period, role: str) -> str | None:
    """Runs whose caller held the role when the run began (the roles it froze, a JSON list)."""
    return None if role == NO_ROLE else runs(period, caller_roles__icontains=f'"{role}"')


def approvals(period: Period, **filters) -> str:
    return changelist("approvalrequest", period, **filters)


class EventLinks:
    """Links into the trace's event list, or None for someone who may not open it."""

    def __init__(self, user, period: Period):
        self.allowed = user.has_perm("runs.view_runevent")
        self.period = period

    def __call__(self, kind: str, **data) -> str | None:
        if not self.allowed:
            return None
        return changelist("runevent", self.period, kind__exact=kind, **{f"data__{k}": v for k, v in data.items()})
