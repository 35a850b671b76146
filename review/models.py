"""Compliance review: which runs are sampled for review (SamplingRule), the sampled runs and who
reviews them (ReviewItem), and what the reviewers concluded (ReviewRecord, append-only and
chained like receipts: review.records writes it, review.verification checks it)."""

import secrets
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from agents.models import Agent
from core.proposals import Proposal
from runs.models import AppendOnlyModel, Receipt, Run


class Trigger(models.TextChoices):
    """What makes a rule sample a run whatever its percentage: each read from the sealed receipt
    and the run's row (review.sampling)."""

    DENIAL = "denial", "an approval was denied"
    EXPIRY = "expiry", "an approval expired"
    REFUSAL = "refusal", "a call was refused (gate, denial, expiry, budget)"
    TAINT = "taint", "the run read untrusted text"
    FALLBACK = "fallback", "another model profile answered"
    POLICY_ERROR = "policy_error", "a policy could not be evaluated"
    BUDGET_STOP = "budget_stop", "a budget stopped the run"
    BLOCKED = "blocked", "an intent guard blocked the run"
    FAILED = "failed", "the run failed"
    TOOL = "tool", "the run called a given tool"


def _seed() -> str:
    return secrets.token_hex(16)


class SamplingRule(models.Model):
    name = models.CharField(max_length=128, unique=True)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                              help_text="Empty = every agent.")
    percentage = models.DecimalField(max_digits=5, decimal_places=2, default=0,
                                     validators=[MinValueValidator(0), MaxValueValidator(100)],
                                     help_text="Share of the agent's runs sampled at random (0-100), decided by "
                                               "sha256(seed + run id): the same run is always in or out.")
    always = models.JSONField(default=list, blank=True,
                              help_text="Triggers that sample a run whatever the percentage: " +
                                        ", ".join(Trigger.values) + ".")
    tools = models.JSONField(default=list, blank=True, help_text="Tool names for the 'tool' trigger.")
    seed = models.CharField(max_length=64, default=_seed, help_text="Makes the percentage's draw reproducible.")
    enabled = models.BooleanField(default=True)
    note = models.TextField(blank=True, help_text="Why this rule exists (the audit's question it answers).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        unknown = [t for t in self.always if t not in Trigger.values] if isinstance(self.always, list) else ["?"]
        if unknown:
            raise ValidationError({"always": f"unknown triggers: {', '.join(map(str, unknown))}"})
        if not isinstance(self.tools, list) or not all(isinstance(t, str) and t for t in self.tools):
            raise ValidationError({"tools": "a list of tool names"})
        if Trigger.TOOL in self.always and not self.tools:
            raise ValidationError({"tools": "the 'tool' trigger needs at least one tool name"})


class SamplingRuleProposal(Proposal):
    """A person's change of a sampling rule that would look at fewer runs (a deletion, disabling, a
    lower percentage, a trigger or tool dropped, a narrower agent). It changes nothing: only a
    different compliance member or governance admin's approval applies it (review.rules), and the
    approved proposal names both. Refused by another, withdrawn by its proposer; stale once the rule
    changed since it was made (its updated_at is no longer base_updated_at)."""

    class Kind(models.TextChoices):
        UPDATE = "update"
        DELETE = "delete"

    rule = models.ForeignKey(SamplingRule, null=True, on_delete=models.SET_NULL, related_name="proposals")
    rule_name = models.CharField(max_length=128)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    base_updated_at = models.DateTimeField(help_text="The rule's updated_at the change was proposed against.")
    changes = models.JSONField(default=dict, help_text="For an update: the fields and their new values.")
    loosens = models.JSONField(default=list, help_text="Why it needs a second person: what it would sample less.")

    def __str__(self) -> str:
        return f"{self.kind} of sampling rule {self.rule_name} by {self.proposed_by} ({self.status})"


class ReviewItem(models.Model):
    """A sampled run: why it was sampled (written once, when its receipt was sealed), who reviews
    it and where the review stands (the state follows the records)."""

    class State(models.TextChoices):
        UNASSIGNED = "unassigned"
        ASSIGNED = "assigned"
        SIGNED_OFF = "signed_off"
        FINDING_OPEN = "finding_open"
        RESOLVED = "resolved"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="review_item")
    receipt = models.OneToOneField(Receipt, on_delete=models.PROTECT, related_name="review_item")
    reasons = models.JSONField(help_text="Each rule that sampled the run and why: [{rule, rule_id, reason, detail}].")
    state = models.CharField(max_length=16, choices=State.choices, default=State.UNASSIGNED)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="+")
    assigned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    assigned_at = models.DateTimeField(null=True, blank=True)
    sampled_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sampled_at"]
        indexes = [models.Index(fields=["state", "sampled_at"]), models.Index(fields=["assignee", "state"])]

    def __str__(self) -> str:
        return f"review of run {self.run_id} ({self.state})"


class ReviewRecord(AppendOnlyModel):
    """One reviewer's conclusion on a sampled run: a sign-off, a finding, or a follow-up of a
    finding. Never changed: a finding is answered by further records. The chain: hash =
    sha256(prev_hash + body), body canonical JSON, seq gap-free from 1, signed by the receipt key."""

    class Kind(models.TextChoices):
        SIGN_OFF = "sign_off"
        FINDING = "finding"
        FOLLOW_UP = "follow_up"

    class Severity(models.TextChoices):
        LOW = "low"
        MEDIUM = "medium"
        HIGH = "high"
        CRITICAL = "critical"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    item = models.ForeignKey(ReviewItem, on_delete=models.PROTECT, related_name="records")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    severity = models.CharField(max_length=16, choices=Severity.choices, blank=True)
    follows = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    resolves = models.BooleanField(default=False, help_text="A follow-up that closes the finding.")
    note = models.TextField(blank=True)
    seq = models.PositiveBigIntegerField(unique=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)
    body = models.TextField(help_text="RFC 8785 canonical JSON: what the hash and signature cover.")
    key_id = models.CharField(max_length=32)
    signature = models.TextField()
    # Set by review.records before the body is sealed (the body's "at" is this time).
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"review record #{self.seq} ({self.kind})"
