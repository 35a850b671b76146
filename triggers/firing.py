"""A fire of a trigger becoming a run, or not: the one place a trigger starts a run.

Every fire is recorded first (so a replayed delivery is refused by the database before anything
starts), then its input is rendered and the trigger's concurrency policy applied with the trigger's
row locked, so two fires at once cannot both find it idle. The run starts through runs.start, as
the trigger's service account, with the fire's origin: the snapshot, intent guards, taint,
approvals, budgets and receipt are the same code as a person's run.
"""

import logging

from django.db import transaction
from django.utils import timezone

from core.access import has_model_permission
from core.api_errors import DomainError
from runs.models import Run
from runs.start import run_start
from runs.states import TERMINAL
from triggers.models import Trigger, TriggerFire
from triggers.templates import TemplateProblem, render

logger = logging.getLogger(__name__)

# A queue that grows while its runs wait for a person would start a burst when they decide.
QUEUE_LIMIT = 20
START_PERMISSION = "runs.add_run"


class FireRefused(DomainError):
    """A fire the trigger's own rules refuse (its template, its service account's roles)."""

    code = "unprocessable"
    status_code = 422


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def origin_of(trigger: Trigger, fire: TriggerFire) -> dict:
    """What the run's snapshot, first event and receipt record of where it came from."""
    # Who wrote the trigger wrote what its runs are asked: like a run's caller, they may not approve them
    # (runs.approvals reads set_up_by from the run's first event).
    set_up_by = sorted({u.get_username() for u in (trigger.created_by, trigger.updated_by) if u is not None})
    origin = {"trigger": trigger.name, "kind": fire.kind, "fire_id": str(fire.id),
              "payload_sha256": fire.payload_sha256, "untrusted": fire.kind == Trigger.Kind.WEBHOOK,
              "set_up_by": set_up_by}
    if fire.kind == Trigger.Kind.WEBHOOK:
        origin["delivery_id"] = fire.delivery_id
    else:
        origin["scheduled_for"] = _iso(fire.scheduled_for)
    return origin


def _busy(trigger: Trigger) -> bool:
    """A run of this trigger has not ended, or fires wait in its queue (they go first)."""
    fires = TriggerFire.objects.filter(trigger=trigger)
    return (fires.filter(outcome=TriggerFire.Outcome.QUEUED).exists()
            or fires.filter(run__isnull=False).exclude(run__status__in=TERMINAL).exists())


def _start(trigger: Trigger, fire: TriggerFire, input_text: str, origin: dict) -> Run:
    user = trigger.service_account.user
    if not user.is_active:
        raise FireRefused(f"service account {user.get_username()!r} is disabled")
    if not has_model_permission(user, START_PERMISSION):
        raise FireRefused(f"service account {user.get_username()!r}: its roles may not start runs")
    run, _ = run_start(agent_slug=trigger.agent.slug, input_text=input_text, caller=user, origin=origin)
    fire.outcome, fire.run, fire.started_at = TriggerFire.Outcome.STARTED, run, timezone.now()
    fire.pending_input, fire.pending_origin = "", None
    return run


def _close(fire: TriggerFire, outcome: str, reason: str) -> TriggerFire:
    fire.outcome, fire.reason = outcome, reason[:300]
    fire.save(update_fields=["outcome", "reason", "run", "started_at", "pending_input", "pending_origin"])
    return fire


def fire(trigger: Trigger, *, kind: str, payload, payload_sha256: str, delivery_id: str = "",
         message_sha256: str = "", scheduled_for=None, received_at=None) -> TriggerFire:
    """Record one fire and apply it. IntegrityError (the transaction rolled back) for a delivery
    or signed message seen before; FireRefused, after recording it, when its rules refuse it."""
    with transaction.atomic():
        trigger = Trigger.objects.select_for_update(of=("self",)).select_related(
            "agent", "service_account__user", "created_by", "updated_by").get(pk=trigger.pk)
        record = TriggerFire.objects.create(
            trigger=trigger, kind=kind, delivery_id=delivery_id, message_sha256=message_sha256,
            scheduled_for=scheduled_for, received_at=received_at or timezone.now(), payload_sha256=payload_sha256,
            outcome=TriggerFire.Outcome.REFUSED)
        if not trigger.enabled:
            return _close(record, TriggerFire.Outcome.SKIPPED, "the trigger is paused")
        origin = origin_of(trigger, record)
        try:
            text = render(trigger.input_template, payload=payload, trigger=trigger.name,
                          fire={"kind": kind, "delivery_id": delivery_id, "at": _iso(record.received_at),
                                "scheduled_for": _iso(scheduled_for)})
        except TemplateProblem as exc:
            _close(record, TriggerFire.Outcome.REFUSED, str(exc))
            refused = FireRefused(str(exc))
        else:
            refused = _apply(trigger, record, text, origin)
    if refused is not None:
        logger.info("trigger %s: fire refused: %s", trigger.name, refused.message)
        raise refused
    return record


def _apply(trigger: Trigger, record: TriggerFire, text: str, origin: dict) -> FireRefused | None:
    policy = trigger.concurrency
    if policy != Trigger.Concurrency.ALLOW and _busy(trigger):
        if policy == Trigger.Concurrency.SKIP:
            _close(record, TriggerFire.Outcome.SKIPPED, "concurrency skip: the trigger's last run has not ended")
            return None
        if TriggerFire.objects.filter(trigger=trigger, outcome=TriggerFire.Outcome.QUEUED).count() >= QUEUE_LIMIT:
            _close(record, TriggerFire.Outcome.SKIPPED, f"concurrency queue: {QUEUE_LIMIT} fires wait already")
            return None
        record.pending_input, record.pending_origin = text, origin
        _close(record, TriggerFire.Outcome.QUEUED, "concurrency queue: starts when the trigger's last run ends")
        return None
    try:
        with transaction.atomic():
            _start(trigger, record, text, origin)
    except DomainError as exc:
        _close(record, TriggerFire.Outcome.REFUSED, exc.message)
        return exc if isinstance(exc, FireRefused) else FireRefused(exc.message)
    _close(record, TriggerFire.Outcome.STARTED, "")
    return None


def drain(trigger_ids=None) -> int:
    """Start the oldest queued fire of each trigger whose last run has ended; how many started."""
    waiting = TriggerFire.objects.filter(outcome=TriggerFire.Outcome.QUEUED)
    if trigger_ids is not None:
        waiting = waiting.filter(trigger_id__in=trigger_ids)
    started = 0
    for trigger_id in set(waiting.values_list("trigger_id", flat=True)):
        started += _drain_one(trigger_id)
    return started


def _drain_one(trigger_id) -> int:
    with transaction.atomic():
        trigger = (Trigger.objects.select_for_update(of=("self",))
                   .select_related("agent", "service_account__user", "created_by", "updated_by")
                   .filter(pk=trigger_id).first())
        if trigger is None or not trigger.enabled:
            return 0  # a paused trigger's queue waits for it to be resumed
        runs = TriggerFire.objects.filter(trigger=trigger, run__isnull=False).exclude(run__status__in=TERMINAL)
        if trigger.concurrency != Trigger.Concurrency.ALLOW and runs.exists():
            return 0
        record = (TriggerFire.objects.filter(trigger=trigger, outcome=TriggerFire.Outcome.QUEUED)
                  .order_by("received_at", "id").first())
        if record is None:
            return 0
        try:
            with transaction.atomic():
                _start(trigger, record, record.pending_input, record.pending_origin)
        except DomainError as exc:
            _close(record, TriggerFire.Outcome.REFUSED, exc.message)
            return 0
        _close(record, TriggerFire.Outcome.STARTED, "started from the queue")
        return 1


def drain_after_seal(sender=None, run=None, **_) -> None:
    """receipt_sealed: a trigger's run has ended; its queue may go on once that has committed."""
    origin = (getattr(run, "snapshot", None) or {}).get("origin")
    if origin and origin.get("trigger"):
        name = origin["trigger"]
        transaction.on_commit(lambda: drain(Trigger.objects.filter(name=name).values_list("pk", flat=True)),
                              robust=True)
