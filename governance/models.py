"""The policy domain: roles (Django groups), tool grants, policies and their history."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


class Role(Group):
    """A role is a Django group; this proxy gives it a home in the governance admin."""

    class Meta:
        proxy = True


class ToolGrant(models.Model):
    """Members of `role` may use `tool` (the agent must also carry it)."""

    role = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="tool_grants")
    tool = models.ForeignKey("agents.Tool", on_delete=models.CASCADE, related_name="grants")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role__name", "tool__name"]
        constraints = [models.UniqueConstraint(fields=["role", "tool"], name="tool_grant_unique")]

    def __str__(self) -> str:
        return f"{self.role.name} may use {self.tool.name}"


class PolicyType(models.TextChoices):
    INTENT_GUARD = "intent_guard", "Intent guard"
    PLAYBOOK = "playbook", "Playbook"
    TOOL_GUIDE = "tool_guide", "Tool guide"
    TOOL_APPROVAL = "tool_approval", "Tool approval"
    OUTPUT_FORMATTER = "output_formatter", "Output formatter"


class MatchMode(models.TextChoices):
    ANY = "any", "Any keyword"
    ALL = "all", "All keywords"


class Policy(models.Model):
    name = models.CharField(max_length=128, unique=True)
    type = models.CharField(max_length=32, choices=PolicyType.choices)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=100, help_text="Lower runs first.")
    agents = models.ManyToManyField(
        "agents.Agent", blank=True, related_name="policies", help_text="None selected = applies to every agent."
    )
    keywords = models.JSONField(default=list, blank=True, help_text="Whole words or phrases, case-insensitive.")
    match_mode = models.CharField(max_length=8, choices=MatchMode.choices, default=MatchMode.ANY)
    regex = models.CharField(max_length=512, blank=True, help_text="Optional; matched case-insensitively.")
    target_tools = models.JSONField(default=list, blank=True, help_text="Tool names, or ['*'] for all.")
    content = models.TextField(blank=True, help_text="Playbook steps, tool guide text or formatter rules.")
    response = models.TextField(blank=True, help_text="What an intent guard answers instead of the agent.")
    approver_role = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT, related_name="approval_policies")
    approval_ttl_seconds = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = the default TTL.")
    quorum = models.PositiveSmallIntegerField(
        default=1, help_text="Tool approval: distinct approvers of the role needed; one denial denies.")
    escalate_to_role = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="escalation_policies",
        help_text="Tool approval: the role a request moves to when it is not decided in time.")
    escalate_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tool approval: how long the first role has before the request escalates.")
    version = models.PositiveIntegerField(default=1)
    emergency_reason = models.TextField(
        blank=True, editable=False,
        help_text="Set when the version in force was activated without a passing golden set (governance.drafts); "
                  "runs freeze it, so their receipts show it. Cleared by the next gated activation.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.name} ({self.type} v{self.version})"


class PolicyVersion(models.Model):
    """One row per change of a policy: who, when, the values before and after."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"

    policy = models.ForeignKey(Policy, null=True, on_delete=models.SET_NULL, related_name="history")
    policy_name = models.CharField(max_length=128)
    version = models.PositiveIntegerField()
    action = models.CharField(max_length=8, choices=Action.choices)
    old_values = models.JSONField(null=True, blank=True)
    new_values = models.JSONField(null=True, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    changed_at = models.DateTimeField(auto_now_add=True)
    # The gate this change passed (or was let past): the draft it was activated from and the
    # eval run of its golden set. Empty for changes made below the gate (bootstrap, the demo).
    draft = models.ForeignKey("PolicyDraft", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    eval_run_id = models.UUIDField(null=True, blank=True, help_text="The gate's eval run (evals.EvalRun).")
    emergency_reason = models.TextField(blank=True, help_text="Activated without a passing golden set, and why.")
    # An emergency activation is asked by one governance admin and confirmed by another (changed_by).
    emergency_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                               on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.policy_name} v{self.version} {self.action}"


class PolicyDraft(models.Model):
    """A proposed change of a policy (a new one, an edit, a deletion), not yet in force.

    It becomes active only through governance.drafts: when the golden sets of the agents it
    governs pass with it in place (the gate, run by the evals app), or through the emergency path,
    which needs a stated reason and a second governance admin, and marks the policy so the receipts
    of the runs it governs say so.
    """

    class State(models.TextChoices):
        DRAFT = "draft", "Draft (the gate has not run)"
        GATE_FAILED = "gate_failed", "Gate failed"
        GATE_PASSED = "gate_passed", "Gate passed (not activated)"
        ACTIVE = "active", "Activated"
        EMERGENCY = "activated_in_emergency", "Activated in an emergency"
        STALE = "stale", "Stale (the policy changed since)"
        DISCARDED = "discarded", "Discarded"

    policy = models.ForeignKey(Policy, null=True, blank=True, on_delete=models.SET_NULL, related_name="drafts",
                               help_text="Empty: the draft creates a policy.")
    policy_name = models.CharField(max_length=128)
    action = models.CharField(max_length=8, choices=PolicyVersion.Action.choices)
    base_version = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="The policy's version the draft was made from.")
    values = models.JSONField(null=True, blank=True, help_text="Every value the policy would have; empty for a deletion.")
    state = models.CharField(max_length=24, choices=State.choices, default=State.DRAFT)
    gate_eval_run_id = models.UUIDField(null=True, blank=True, help_text="The last gate's eval run (evals.EvalRun).")
    gate_report = models.JSONField(null=True, blank=True,
                                   help_text="The last gate: pass rate, threshold, and each case before and after.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    activated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    activated_at = models.DateTimeField(null=True, blank=True)
    emergency_reason = models.TextField(blank=True)
    # The emergency path takes two governance admins: one asks (with the reason), another confirms
    # (activated_by). Only the platform (user None: load_demo, bootstrap) activates in one step.
    emergency_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                               on_delete=models.SET_NULL, related_name="+")
    emergency_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"draft {self.pk}: {self.action} {self.policy_name} ({self.state})"


class GovernanceStamp(models.Model):
    """One row whose stamp changes with every write to a table a run's governance is frozen from.

    Database triggers (core.stamp) write it in the same transaction as the change, whatever
    made it: a service, the admin, a bulk update or delete, raw SQL. A cache of frozen governance
    keyed by the stamp is therefore never served after a change has committed.
    """

    stamp = models.CharField(max_length=36)

    def __str__(self) -> str:
        return self.stamp


class ApiToken(models.Model):
    """An API token, stored as the sha256 digest of its secret: the secret is shown once, when
    it is issued, and never again, to anyone (superusers and DBAs included).

    No slow hash (PBKDF2, Argon2) is needed here: those exist to stretch secrets people choose,
    which are guessable. A token's secret is 256 bits from the OS's CSPRNG, so a stolen digest
    cannot be searched back to it, and one sha256 keeps the lookup an indexed equality match
    on every request.
    """

    class Issued(models.TextChoices):
        API = "api", "by its owner, through the API"
        COMMAND = "command", "by a server operator, with manage.py issue_token"

    public_id = models.CharField(max_length=16, unique=True, editable=False,
                                 help_text="Names the token in the admin and in decisions; part of the key, not secret.")
    digest = models.CharField(max_length=64, unique=True, editable=False, help_text="sha256 of the key, hex.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What its owner calls it.")
    issued_via = models.CharField(max_length=16, choices=Issued.choices, editable=False)
    issued_by = models.CharField(max_length=150, blank=True, editable=False,
                                 help_text="Who issued it: the owner (API), or the operating-system user running the command.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, editable=False, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False,
                                        help_text="Updated at most once per few minutes, not on every request.")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_by = models.CharField(max_length=150, blank=True, editable=False)
    seal = models.CharField(
        max_length=64, blank=True, editable=False,
        help_text="HMAC under the server's SECRET_KEY of id, digest, owner and expiry (governance.tokens): a row "
                  "written or edited outside Warrant, by someone holding only the database, does not authenticate.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.public_id} ({self.user})"
