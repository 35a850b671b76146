"""The list behind each figure: the workbench's admin changelists, with the query filters they take.

The run list takes status, agent, tainted, the creation date (created_at__gte/__lt, as its date
filter writes them) and any lookup on its own fields (caller_roles__icontains); the approval list
status, policy_name and the date; the trace's event list kind and keys of an event's data
(data__tool=...).

A link is given only where the list holds the figure for the person following it: the run and
approval lists show everyone's records to compliance and superusers only (runs.selectors), so a
governance admin outside compliance reads the figures without those links; the event list is
for those who hold runs.view_runevent (superusers, or a role given it).
"""

from datetime import date
from urllib.parse import urlencode

from django.urls import reverse

from core.permissions import reads_everything
from review.figures import NO_ROLE, Period


def _bound(moment) -> str:
    return str(moment)  # "2026-11-18 00:00:00+00:00", as the admin's own date filter writes it


def changelist(model: str, period: Period, **filters) -> str:
    query = {"created_at__gte": _bound(period.start), "created_at__lt": _bound(period.end), **filters}
    return f"{reverse(f'admin:runs_{model}_changelist')}?{urlencode(query)}"


def one_day(day: str) -> Period:
    first = date.fromisoformat(day)
    return Period(first, first)


class Links:
    """The links of one page: for this user, over this period (a day's, for a bar of one day)."""

    def __init__(self, user, period: Period):
        self.period = period
        self.lists = reads_everything(user)  # the run and approval lists hold every record
        self.trace = user.has_perm("runs.view_runevent")

    def runs(self, **filters) -> str | None:
        return changelist("run", self.period, **filters) if self.lists else None

    def runs_on(self, day: str, **filters) -> str | None:
        return changelist("run", one_day(day), **filters) if self.lists else None

    def role_runs(self, role: str) -> str | None:
        """Runs whose caller held the role when the run began (the roles it froze, a JSON list)."""
        return None if role == NO_ROLE else self.runs(caller_roles__icontains=f'"{role}"')

    def approvals(self, **filters) -> str | None:
        return changelist("approvalrequest", self.period, **filters) if self.lists else None

    def events(self, kind: str, **data) -> str | None:
        if not self.trace:
            return None
        return changelist("runevent", self.period, kind__exact=kind, **{f"data__{k}": v for k, v in data.items()})
