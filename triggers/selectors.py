"""Reads of triggers more than one caller needs: the list, and a trigger's recent record."""

from django.db.models import Count, Q

from runs.states import TERMINAL, RunStatus
from triggers.models import Trigger, TriggerFire

RECENT = 50


def triggers():
    return Trigger.objects.select_related("agent", "service_account__user").order_by("name")


def stats_of(trigger: Trigger, *, recent: int = RECENT) -> dict:
    """Its last `recent` fires: how many started a run, how many of those ended and succeeded,
    the success rate over the ended ones (None before any ended), and its last run."""
    ids = list(TriggerFire.objects.filter(trigger=trigger).order_by("-received_at").values_list("id", flat=True)[:recent])
    fires = TriggerFire.objects.filter(id__in=ids)
    terminal = [str(status) for status in TERMINAL]
    counts = fires.aggregate(
        fires=Count("id"), started=Count("run"),
        ended=Count("run", filter=Q(run__status__in=terminal)),
        succeeded=Count("run", filter=Q(run__status=RunStatus.SUCCEEDED)),
        skipped=Count("id", filter=Q(outcome=TriggerFire.Outcome.SKIPPED)),
        refused=Count("id", filter=Q(outcome=TriggerFire.Outcome.REFUSED)),
        queued=Count("id", filter=Q(outcome=TriggerFire.Outcome.QUEUED)))
    last = fires.filter(run__isnull=False).select_related("run").order_by("-received_at").first()
    counts["success_rate"] = round(counts["succeeded"] / counts["ended"], 3) if counts["ended"] else None
    counts["last_run"] = {"id": str(last.run_id), "status": last.run.status} if last else None
    return counts
