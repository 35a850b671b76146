"""Prometheus metrics at /metrics, read from the database when scraped.

A custom collector: every figure is an aggregate query over the tables that already record it
(runs, run events, approvals, receipts, the breaker's health rows, the witness sinks), run when
Prometheus asks. So the answer is the same from any web process, and counts what every gunicorn
worker and Celery worker did, with no multiprocess directory and nothing kept in memory. Counters
are counts of rows that are never deleted (runs, events, receipts are append-only), so they only
grow. A section whose query fails is left out and says so in warrant_metrics_section_up.

Access: a bearer token (WARRANT_METRICS_TOKEN) or a client address in WARRANT_METRICS_ALLOWED_IPS
(addresses or networks; the address is governance.auth.client_ip's). With neither configured the
endpoint does not exist (404); a request that is neither is refused (403).
"""

import ipaddress
import logging
import os
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, IntegerField, Max, Min, Q, Sum
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Cast
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

logger = logging.getLogger(__name__)

TERMINAL = ("succeeded", "failed", "blocked", "stopped", "cancelled")
LATENCY_BUCKETS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)
DECISION_BUCKETS_S = (60, 300, 900, 3600, 4 * 3600, 24 * 3600, 72 * 3600)
BREAKER_STATES = ("closed", "half_open", "open")


def _setting(name: str, default):
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name, "")
        if isinstance(default, tuple):
            value = tuple(v.strip() for v in value.split(",") if v.strip())
    return value or default


def _allowed_address(request) -> bool:
    from governance.auth import client_ip

    allowed = _setting("WARRANT_METRICS_ALLOWED_IPS", ())
    if not allowed:
        return False
    try:
        address = ipaddress.ip_address(client_ip(request))
    except ValueError:
        return False
    for entry in allowed:
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            logger.warning("WARRANT_METRICS_ALLOWED_IPS: %r is not an address or network", entry)
    return False


def _bearer_ok(request) -> bool:
    token = _setting("WARRANT_METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and constant_time_compare(given.strip(), token)


def metrics_view(request):
    if not _setting("WARRANT_METRICS_TOKEN", "") and not _setting("WARRANT_METRICS_ALLOWED_IPS", ()):
        raise Http404("metrics are not enabled")
    if not (_allowed_address(request) or _bearer_ok(request)):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain; charset=utf-8")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WarrantCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class WarrantCollector:
    """Reads the database at each scrape; see the module's docstring."""

    SECTIONS = ("runs", "model_calls", "breakers", "approvals", "receipts", "witness", "queue")

    def collect(self):
        up = GaugeMetricFamily("warrant_metrics_section_up", "1 when the section's queries answered at this scrape",
                               labels=["section"])
        for section in self.SECTIONS:
            try:
                families = list(getattr(self, f"_{section}")())
            except Exception:  # one broken query must not take every metric with it
                logger.exception("metrics: the %s section failed", section)
                up.add_metric([section], 0)
                continue
            up.add_metric([section], 1)
            yield from families
        yield up

    def _runs(self):
        from runs.models import Run

        rows = (Run.objects.values("agent__slug", "status")
                .annotate(n=Count("id"), started=Count("started_at"), steps=Sum("step"),
                          tainted=Count("id", filter=Q(tainted=True))).order_by())
        by_status = GaugeMetricFamily("warrant_runs", "Runs by agent and their status now", labels=["agent", "status"])
        started = CounterMetricFamily("warrant_runs_started", "Runs a worker has started, by agent", labels=["agent"])
        finished = CounterMetricFamily("warrant_runs_finished", "Runs that ended, by agent and final status",
                                       labels=["agent", "status"])
        steps = CounterMetricFamily("warrant_run_steps", "Steps taken by runs (model turns and tool batches)",
                                    labels=["agent"])
        tainted = CounterMetricFamily("warrant_runs_tainted", "Runs that read untrusted text", labels=["agent"])
        blocked = CounterMetricFamily("warrant_runs_blocked", "Runs blocked by an intent guard or screening",
                                      labels=["agent"])
        totals: dict[str, dict[str, int]] = {}
        for row in rows:
            agent, status = row["agent__slug"], row["status"]
            by_status.add_metric([agent, status], row["n"])
            if status in TERMINAL:
                finished.add_metric([agent, status], row["n"])
            sums = totals.setdefault(agent, {"started": 0, "steps": 0, "tainted": 0, "blocked": 0})
            sums["started"] += row["started"]
            sums["steps"] += row["steps"] or 0
            sums["tainted"] += row["tainted"]
            sums["blocked"] += row["n"] if status == "blocked" else 0
        for agent, sums in sorted(totals.items()):
            started.add_metric([agent], sums["started"])
            steps.add_metric([agent], sums["steps"])
            tainted.add_metric([agent], sums["tainted"])
            blocked.add_metric([agent], sums["blocked"])
        return [by_status, started, finished, steps, tainted, blocked]

    def _model_calls(self):
        """From the runs' model_call events: one per call through a profile chain."""
        from runs.models import RunEvent

        latency = Cast(KT("data__latency_ms"), IntegerField())
        buckets = {f"le{b}": Count("id", filter=Q(latency_ms__lte=b)) for b in LATENCY_BUCKETS_MS}
        rows = (RunEvent.objects.filter(kind="model_call").annotate(
                    latency_ms=latency, answered=KT("data__profile"), outcome=KT("data__outcome"),
                    requested=_REQUESTED_PROFILE())
                .values("requested", "outcome")
                .annotate(n=Count("id"), total_ms=Sum("latency_ms"),
                          fallbacks=Count("id", filter=~Q(answered=F("requested"))), **buckets)
                .order_by())
        hist = HistogramMetricFamily("warrant_model_call_duration_seconds",
                                     "Model calls through a profile's chain (retries and fallbacks included)",
                                     labels=["profile", "outcome"])
        fallbacks = CounterMetricFamily("warrant_model_fallbacks",
                                        "Model calls answered by a fallback profile, by the profile asked for",
                                        labels=["profile"])
        per_profile: dict[str, int] = {}
        for row in rows:
            profile, outcome = row["requested"] or "", row["outcome"] or ""
            points = [(str(b / 1000), row[f"le{b}"]) for b in LATENCY_BUCKETS_MS] + [("+Inf", row["n"])]
            hist.add_metric([profile, outcome], points, (row["total_ms"] or 0) / 1000)
            per_profile[profile] = per_profile.get(profile, 0) + row["fallbacks"]
        for profile, n in sorted(per_profile.items()):
            fallbacks.add_metric([profile], n)
        unavailable = CounterMetricFamily("warrant_model_calls_unavailable",
                                          "Model calls no profile of the chain answered (the run failed)",
                                          labels=["profile"])
        for row in (RunEvent.objects.filter(kind="model_error")
                    .annotate(requested=_REQUESTED_PROFILE())
                    .values("requested").annotate(n=Count("id")).order_by()):
            unavailable.add_metric([row["requested"] or ""], row["n"])
        return [hist, fallbacks, unavailable]

    def _breakers(self):
        from agents.breaker import breaker_state
        from agents.models import ModelProfileHealth

        now = timezone.now()
        state = GaugeMetricFamily("warrant_model_breaker_state", "The circuit breaker of each model profile (1: its state)",
                                  labels=["profile", "state"])
        failures = GaugeMetricFamily("warrant_model_breaker_consecutive_failures",
                                     "Failed attempts in a row on each model profile", labels=["profile"])
        for health in ModelProfileHealth.objects.only("profile_name", "opened_until", "consecutive_failures"):
            current = breaker_state(health, now)
            for name in BREAKER_STATES:
                state.add_metric([health.profile_name, name], 1 if name == current else 0)
            failures.add_metric([health.profile_name], health.consecutive_failures)
        return [state, failures]

    def _approvals(self):
        from runs.models import ApprovalRequest

        pending = GaugeMetricFamily("warrant_approvals_pending", "Approval requests waiting, by approver role",
                                    labels=["role"])
        oldest = GaugeMetricFamily("warrant_approvals_pending_oldest_seconds",
                                   "Age of the oldest waiting request, by approver role", labels=["role"])
        now = timezone.now()
        for row in (ApprovalRequest.objects.filter(status="pending").values("approver_role__name")
                    .annotate(n=Count("id"), first=Min("created_at")).order_by()):
            pending.add_metric([row["approver_role__name"]], row["n"])
            oldest.add_metric([row["approver_role__name"]], max(0.0, (now - row["first"]).total_seconds()))
        waited = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
        buckets = {f"le{b}": Count("id", filter=Q(decided_at__lte=F("created_at") + timedelta(seconds=b)))
                   for b in DECISION_BUCKETS_S}
        hist = HistogramMetricFamily("warrant_approval_decision_seconds",
                                     "Time from an approval request to its decision, by role and decision",
                                     labels=["role", "decision"])
        for row in (ApprovalRequest.objects.filter(decided_at__isnull=False)
                    .values("approver_role__name", "status")
                    .annotate(n=Count("id"), total=Sum(waited), **buckets).order_by()):
            points = [(str(b), row[f"le{b}"]) for b in DECISION_BUCKETS_S] + [("+Inf", row["n"])]
            total = row["total"]
            seconds = total.total_seconds() if isinstance(total, timedelta) else float(total or 0) / 1e6
            hist.add_metric([row["approver_role__name"], row["status"]], points, seconds)
        return [pending, oldest, hist]

    def _receipts(self):
        from runs.models import Receipt

        head = Receipt.objects.aggregate(seq=Max("seq"))["seq"] or 0
        sealed = CounterMetricFamily("warrant_receipts_sealed", "Receipts sealed (the chain's length)")
        sealed.add_metric([], head)
        return [sealed]

    def _witness(self):
        from runs.witness import witness_status

        status = witness_status()
        behind = GaugeMetricFamily("warrant_witness_lag_receipts", "Receipts the witness sink has not been given yet",
                                   labels=["sink"])
        seconds = GaugeMetricFamily("warrant_witness_lag_seconds",
                                    "Age of the oldest receipt the witness sink has not been given", labels=["sink"])
        for name, sink in sorted(status["sinks"].items()):
            behind.add_metric([name], sink["behind_receipts"])
            seconds.add_metric([name], sink["behind_seconds"])
        return [behind, seconds]

    def _queue(self):
        from runs.models import Run

        now = timezone.now()
        row = Run.objects.filter(status="queued").aggregate(n=Count("id"), first=Min("status_changed_at"))
        depth = GaugeMetricFamily("warrant_queue_depth", "Runs waiting for a worker (status queued)")
        depth.add_metric([], row["n"])
        oldest = GaugeMetricFamily("warrant_queue_oldest_seconds", "How long the longest-waiting queued run has waited")
        oldest.add_metric([], max(0.0, (now - row["first"]).total_seconds()) if row["first"] else 0.0)
        families = [depth, oldest]
        broker = _broker_depth()
        if broker is not None:
            messages = GaugeMetricFamily("warrant_broker_queue_messages", "Messages in the Celery queue on Redis",
                                         labels=["queue"])
            for name, n in broker.items():
                messages.add_metric([name], n)
            families.append(messages)
        return families


def _REQUESTED_PROFILE():
    """The profile the run's agent version names (its snapshot), joined from an event's run."""
    return KeyTextTransform("name", KeyTransform("model_profile", KeyTransform("agent", "run__snapshot")))


def _broker_depth() -> dict[str, int] | None:
    """LLEN of the default Celery queue when the broker is Redis; None otherwise."""
    url = settings.CELERY_BROKER_URL
    if settings.CELERY_TASK_ALWAYS_EAGER or not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery") or "celery"
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        return {queue: int(client.llen(queue))}
    finally:
        client.close()
