"""What a run talks to: agents and their frozen versions, the tool registry, model profiles.

The demo CRM lives here too, in tables of its own, so the demo tools have real side effects.
"""

import hashlib
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from agents import profile_options
from agents.trust_models import TrustChange, TrustProposal  # noqa: F401 (agents.models is where Django finds them)


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class ToolSource(models.Model):
    """Where tools come from: an MCP server, an OpenAPI service or a Python module.

    Secrets are never stored: an HTTP source names the environment variable whose value is sent
    in `auth_header`. A sync discovers the source's tools; new ones arrive disabled and granted
    to no role, and a tool whose description or schema changed is held until re-approved.
    """

    class Kind(models.TextChoices):
        MCP_STDIO = "mcp_stdio", "MCP server (stdio command)"
        MCP_HTTP = "mcp_http", "MCP server (streamable HTTP)"
        OPENAPI = "openapi", "OpenAPI 3 service"
        PYTHON = "python", "Python functions"

    name = models.SlugField(max_length=32, unique=True, help_text="Prefix of its tools' names.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    description = models.TextField(blank=True)
    command = models.JSONField(default=list, blank=True, help_text="mcp_stdio: the program and its arguments.")
    env_passthrough = models.JSONField(
        default=list, blank=True, help_text="mcp_stdio: names of environment variables the server process may see."
    )
    url = models.CharField(max_length=500, blank=True, help_text="mcp_http: the endpoint; openapi: the document's URL.")
    document = models.JSONField(null=True, blank=True, help_text="openapi: the document itself (instead of a URL).")
    path = models.CharField(
        max_length=500, blank=True, help_text="openapi: a document file; python: a dotted module or callable path."
    )
    base_url = models.CharField(max_length=500, blank=True, help_text="openapi: where calls go (default: the document's first server).")
    auth_header = models.CharField(max_length=64, blank=True, help_text="HTTP header carrying the credential, e.g. Authorization.")
    auth_env = models.CharField(max_length=128, blank=True, help_text="Name of the environment variable holding its value.")
    timeout_seconds = models.FloatField(default=30.0, help_text="Default per-call timeout of its tools.")
    approver_role = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Approves calls to its side-effecting tools (defaults to the taint approver role).",
    )
    enabled = models.BooleanField(default=True)
    trusted = models.BooleanField(
        default=False,
        help_text="Its tools' descriptions and results are not outsiders' text: reading them does not taint a run. "
                  "Set by a governance admin only (agents.trust), and every change is recorded.",
    )
    last_synced_at = models.DateTimeField(null=True, blank=True, help_text="When the last sync ended, whatever its outcome.")
    last_sync_ok = models.BooleanField(
        null=True, blank=True, help_text="Whether the last sync worked; empty until the first sync."
    )
    last_sync_error_code = models.CharField(max_length=32, blank=True, help_text="Why the last sync failed, as a code.")
    last_sync_error = models.TextField(blank=True, help_text="Why the last sync failed; empty when it worked.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


def tool_fingerprint(description: str, input_schema: dict) -> str:
    """What a governance admin approves of a discovered tool: its description and its schema."""
    return hashlib.sha256(canonical_json([description, input_schema]).encode()).hexdigest()


class Tool(models.Model):
    class Source(models.TextChoices):
        PYTHON = "python", "Python function"
        MCP = "mcp", "MCP server"
        OPENAPI = "openapi", "OpenAPI operation"

    name = models.SlugField(max_length=64, unique=True, allow_unicode=False)
    description = models.TextField()
    input_schema = models.JSONField(default=dict, help_text="JSON Schema of the tool's arguments.")
    side_effect = models.BooleanField(
        default=False, help_text="Changes the world (sends, deletes, writes). Executed once, through the outbox."
    )
    enabled = models.BooleanField(default=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.PYTHON)
    handler = models.CharField(max_length=255, blank=True, help_text="Dotted path of the Python callable.")
    timeout_seconds = models.FloatField(default=10.0)
    tool_source = models.ForeignKey(
        ToolSource, null=True, blank=True, on_delete=models.CASCADE, related_name="tools",
        help_text="Where it was discovered; empty for the built-in tools.",
    )
    remote_name = models.CharField(max_length=255, blank=True, help_text="Its name on the MCP server, or the operation id.")
    binding = models.JSONField(default=dict, blank=True, help_text="How a call reaches it (HTTP method, path, parameters).")
    requires_approval = models.BooleanField(
        default=False, help_text="Every call waits for a member of the approver role, whatever the policies say."
    )
    approver_role = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    approved_sha256 = models.CharField(max_length=64, blank=True, help_text="Fingerprint of the approved description and schema.")
    held = models.BooleanField(default=False, help_text="Changed at its source since approval: not callable until re-approved.")
    pending_change = models.JSONField(null=True, blank=True, help_text="What the source reports now, awaiting re-approval.")
    trusted_output = models.BooleanField(
        default=False,
        help_text="Built-in tools: its results hold no outsiders' text, so reading them does not taint a run. A "
                  "discovered tool follows its source's mark instead. Set by a governance admin only (agents.trust).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def output_trusted(self) -> bool:
        """Whether a run may read what this tool says (results, description) and stay untainted."""
        if self.tool_source_id:
            return self.tool_source.trusted
        return self.trusted_output

    def spec(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "side_effect": self.side_effect,
            "source": self.source,
            "trusted": self.output_trusted,
            "tool_source": self.tool_source.name if self.tool_source_id else "",
            "requires_approval": self.requires_approval,
            "approver_role": self.approver_role.name if self.approver_role_id else "",
            "fingerprint": tool_fingerprint(self.description, self.input_schema),
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
    # Sent with each request to this profile's server (agents.profile_options checks and applies them).
    max_tokens = models.PositiveIntegerField(
        null=True, blank=True, validators=[profile_options.max_tokens_validator],
        help_text=f"The longest reply one call may get, in tokens (empty: {profile_options.DEFAULT_MAX_TOKENS}). "
                  "Not the run's budget, which is the agent's.")
    temperature = models.FloatField(
        null=True, blank=True, validators=[profile_options.temperature_validator],
        help_text="0 to 2 (anthropic: 0 to 1); empty: the server's default.")
    extra_body = models.JSONField(
        default=dict, blank=True, validators=[profile_options.extra_body_validator],
        help_text=f"A JSON object added to each request's body (e.g. top_k, seed, response_format); at most "
                  f"{profile_options.EXTRA_BODY_MAX_BYTES} bytes. It may not set the model, messages, tools, "
                  "streaming, max_tokens or temperature, nor hold a key.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        if problems := profile_options.backend_problems(self.backend, self.temperature):
            raise ValidationError(problems)

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
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "extra_body": dict(self.extra_body or {}),
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
    tool_caps = models.JSONField(
        default=dict, blank=True, help_text='Calls allowed per run for a tool, e.g. {"send_email": 1}.')
    budget_role = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="budget_agents",
        help_text="Who may extend a run's budget when it runs out. Empty = no extensions: the run stops.")
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
