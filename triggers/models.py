"""Triggers, the service accounts they run as, and the history of their fires.

A trigger starts runs of one agent from an event: a schedule's tick or a signed webhook delivery.
Every fire is recorded (started, queued, skipped or refused, and why), so its history is the
trigger's runs and the fires that did not become one.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

MAX_PAYLOAD_BYTES = 64 * 1024
REPLAY_WINDOW_SECONDS = 300


class ServiceAccount(models.Model):
    """A user that no person signs in as (its password is unusable): the identity a trigger's runs
    have. Its roles are its groups, like anyone's, so grants and separation of duties apply."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="service_account")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Disabled: its user is inactive (services.service_account_set_active), and who did it, when.
    disabled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    disabled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.user.get_username()


class Trigger(models.Model):
    class Kind(models.TextChoices):
        SCHEDULE = "schedule"
        WEBHOOK = "webhook"

    class Concurrency(models.TextChoices):
        SKIP = "skip", "skip: a fire while the last run goes on starts nothing"
        QUEUE = "queue", "queue: it starts when the last run has ended"
        ALLOW = "allow", "allow: it starts at once, beside the last run"

    class Missed(models.TextChoices):
        RUN_ONCE = "run_once", "run once: a schedule late after downtime fires once"
        SKIP = "skip", "skip: a late fire is recorded and starts nothing"

    name = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="triggers")
    input_template = models.TextField(
        help_text="The run's input, a sandboxed Jinja template: {{ payload.ticket.title }}, {{ trigger }}, {{ fire.at }}.")
    service_account = models.ForeignKey(ServiceAccount, on_delete=models.PROTECT, related_name="triggers")
    enabled = models.BooleanField(default=True)
    paused_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    paused_at = models.DateTimeField(null=True, blank=True)
    concurrency = models.CharField(max_length=8, choices=Concurrency.choices, default=Concurrency.SKIP)
    # Schedule: a crontab ("m h dom mon dow", in `timezone`) or an interval in seconds.
    cron = models.CharField(max_length=120, blank=True)
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    missed = models.CharField(max_length=8, choices=Missed.choices, default=Missed.RUN_ONCE)
    periodic_task = models.OneToOneField("django_celery_beat.PeriodicTask", on_delete=models.SET_NULL, null=True,
                                         blank=True, related_name="trigger")
    last_fire_at = models.DateTimeField(null=True, blank=True, help_text="When the schedule last fired.")
    # Webhook: the HMAC secret, encrypted (triggers.secrets); shown once, when made or rotated.
    secret_encrypted = models.TextField(blank=True)
    secret_rotated_at = models.DateTimeField(null=True, blank=True)
    payload_schema = models.JSONField(null=True, blank=True, help_text="A JSON schema the payload must meet.")
    max_payload_bytes = models.PositiveIntegerField(default=MAX_PAYLOAD_BYTES)
    replay_window_seconds = models.PositiveIntegerField(default=REPLAY_WINDOW_SECONDS)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    # Who last changed it: with created_by, who wrote what its runs are asked (triggers.firing.origin_of).
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="trigger_schedule_has_one_schedule",
                condition=~Q(kind="schedule") | (Q(cron="") & Q(interval_seconds__isnull=False))
                | (~Q(cron="") & Q(interval_seconds__isnull=True))),
        ]

    def __str__(self) -> str:
        return self.name


class TriggerFire(models.Model):
    """One fire of a trigger: a schedule's tick or a webhook delivery, and what came of it."""

    class Outcome(models.TextChoices):
        STARTED = "started"
        QUEUED = "queued"
        SKIPPED = "skipped"
        REFUSED = "refused"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    trigger = models.ForeignKey(Trigger, on_delete=models.CASCADE, related_name="fires")
    kind = models.CharField(max_length=16, choices=Trigger.Kind.choices)
    delivery_id = models.CharField(max_length=200, blank=True)
    # sha256 of the signed message (timestamp and body): the same signed delivery is accepted once,
    # whatever delivery id is sent beside it.
    message_sha256 = models.CharField(max_length=64, blank=True)
    scheduled_for = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(default=timezone.now)
    payload_sha256 = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    reason = models.CharField(max_length=300, blank=True)
    # A queued fire keeps the input it will start with (rendered when it came in) and its origin.
    pending_input = models.TextField(blank=True)
    pending_origin = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    run = models.OneToOneField("runs.Run", on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="trigger_fire")

    class Meta:
        ordering = ["-received_at"]
        constraints = [
            models.UniqueConstraint(fields=["trigger", "delivery_id"], condition=~Q(delivery_id=""),
                                    name="trigger_delivery_once"),
            models.UniqueConstraint(fields=["trigger", "message_sha256"], condition=~Q(message_sha256=""),
                                    name="trigger_message_once"),
        ]
        indexes = [models.Index(fields=["trigger", "outcome", "received_at"])]

    def __str__(self) -> str:
        return f"{self.trigger.name} {self.kind} {self.outcome}"
