"""What a run talks to: agents and their frozen versions, the tool registry, model profiles.

The demo CRM lives here too, in tables of its own, so the demo tools have real side effects.
"""

import hashlib
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class Tool(models.Model):
    class Source(models.TextChoices):
        PYTHON = "python", "Python function"

    name = models.SlugField(max_length=64, unique=True, allow_unicode=False)
    description = models.TextField()
    input_schema = models.JSONField(default=dict, help_text="JSON Schema of the tool's arguments.")
    side_effect = models.BooleanField(
        default=False, help_text="Changes the world (sends, deletes, writes). Executed once, through the outbox."
    )
    enabled = models.BooleanField(default=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.PYTHON)
    handler = models.CharField(max_length=255, help_text="Dotted path of the Python callable.")
    timeout_seconds = models.FloatField(default=10.0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def spec(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "side_effect": self.side_effect,
        }


class ModelProfile(models.Model):
    """How to reach a model. Secrets are never stored: `api_key_env` names the variable."""

    name = models.SlugField(max_length=64, unique=True)
    backend = models.CharField(
        max_length=255, default="scripted", help_text="'scripted' or the dotted path of a backend class."
    )
    base_url = models.CharField(max_length=200, blank=True, help_text="http(s) URL of the model server.")
    model = models.CharField(max_length=128, default="scripted-1")
    api_key_env = models.CharField(max_length=128, blank=True, help_text="Name of the environment variable.")
    connect_timeout = models.FloatField(default=5.0)
    read_timeout = models.FloatField(default=60.0)
    max_retries = models.PositiveSmallIntegerField(default=2)
    fallbacks = models.JSONField(default=list, blank=True, help_text="Ordered profile names to try next.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def spec(self) -> dict:
        return {
            "name": self.name,
            "backend": self.backend,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "max_retries": self.max_retries,
            "fallbacks": list(self.fallbacks),
        }


class ModelProfileHealth(models.Model):
    """How a profile's server has been answering, shared by every worker: the circuit breaker.

    Keyed by profile name (what a frozen agent version refers to). Closed while opened_until is
    null; open until opened_until; past it, one worker at a time may probe (agents.breaker).
    """

    profile_name = models.SlugField(max_length=64, unique=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    opened_until = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, help_text="Warrant's own words; never a key.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile_name"]
        verbose_name_plural = "model profile health"

    def __str__(self) -> str:
        return self.profile_name


class Agent(models.Model):
    """The editable draft. Runs never use it directly: they use a published AgentVersion."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    instructions = models.TextField()
    model_profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="agents")
    tools = models.ManyToManyField(Tool, blank=True, related_name="agents")
    output_schema = models.JSONField(null=True, blank=True, help_text="JSON Schema the final answer must meet.")
    max_turns = models.PositiveIntegerField(default=12)
    max_tool_calls = models.PositiveIntegerField(default=20)
    max_tokens = models.PositiveIntegerField(default=50_000)
    deadline_seconds = models.PositiveIntegerField(default=600)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def current_version(self) -> "AgentVersion | None":
        return self.versions.order_by("-version").first()


class AgentVersion(models.Model):
    """A published, immutable snapshot of an agent: what a run points at."""

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    sha256 = models.CharField(max_length=64)
    published_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    published_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "-version"]
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="agent_version_unique")]

    def __str__(self) -> str:
        return f"{self.agent.slug} v{self.version}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValidationError("A published agent version is immutable; publish a new version.")
        self.sha256 = hashlib.sha256(canonical_json(self.spec).encode()).hexdigest()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("Published agent versions are never deleted; runs point at them.")


# --- The demo CRM -----------------------------------------------------------------------


class CrmAccount(models.Model):
    account_id = models.CharField(max_length=16, unique=True)
    name = models.CharField(max_length=128)
    plan = models.CharField(max_length=32)
    arr = models.PositiveIntegerField()
    renewal_date = models.DateField()
    nps = models.IntegerField()
    owner = models.CharField(max_length=128)
    monthly_active_seats = models.JSONField(help_text="Six months, oldest first.")

    class Meta:
        ordering = ["account_id"]
        verbose_name = "CRM account"

    def __str__(self) -> str:
        return f"{self.account_id} {self.name}"


class CrmTicket(models.Model):
    ticket_id = models.CharField(max_length=16, unique=True)
    account = models.ForeignKey(CrmAccount, on_delete=models.CASCADE, related_name="tickets")
    priority = models.CharField(max_length=2)
    title = models.CharField(max_length=255)
    status = models.CharField(max_length=16, default="open")

    class Meta:
        ordering = ["ticket_id"]
        verbose_name = "CRM ticket"

    def __str__(self) -> str:
        return f"{self.ticket_id} {self.title}"


class SentEmail(models.Model):
    """The demo mail outbox: what send_email really did."""

    idempotency_key = models.CharField(max_length=128, unique=True)
    to = models.CharField(max_length=254)
    subject = models.CharField(max_length=255)
    body = models.TextField()
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]

    def __str__(self) -> str:
        return f"to {self.to}: {self.subject}"
