"""Trust marks' records: each change of a mark and each confirmed loosening of an approval
(TrustChange, sealed into the trust chain) and each proposal to loosen (TrustProposal).
agents.models imports them, so they are agents' models; agents.trust and agents.trust_approval
are their only writers."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class TrustChange(models.Model):
    """One row per loosening or tightening of Warrant's hold on a tool or a source that the trust
    chain records: a change of a trust mark (kind "trust": `was_trusted` -> `trusted`), a confirmed
    two-person proposal to loosen an approval or one person's one-step tightening of it (kind
    "approval": `before` -> `after`, the approval by name; a tightening has no proposer), or a
    confirmed proposal to re-approve a trusted source's held tool (kind "change": {"approved_sha256": ...}
    before and after). Written by agents.trust and agents.trust_approval in the transaction of the
    change itself, and sealed there into the trust chain: hash = sha256(prev_hash + body), body
    canonical JSON, seq gap-free from 1, signed by the receipt key and witnessed (review.trust_chain
    writes it, review.trust_verification and the offline verifier check it), so a change rewritten
    or removed afterwards shows."""

    class Subject(models.TextChoices):
        TOOL_SOURCE = "tool_source", "Tool source"
        TOOL = "tool", "Tool"  # a built-in tool, or (kinds "approval" and "change") any tool

    class Kind(models.TextChoices):  # the TrustProposal kinds, for the change each one's confirmation makes
        TRUST = "trust", "Trust mark"
        APPROVAL = "approval", "Approval loosened"
        CHANGE = "change", "Held change re-approved"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TRUST)
    subject = models.CharField(max_length=16, choices=Subject.choices)
    name = models.CharField(max_length=64)
    trusted = models.BooleanField(null=True, blank=True)  # kind "trust" only, as was_trusted
    was_trusted = models.BooleanField(null=True, blank=True)
    # Kinds "approval" and "change": what the confirmed proposal found and what it left, as sealed.
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Who proposed what changed_by confirmed (agents.TrustProposal: always, for kind "change" and for a
    # loosening of kind "approval"); null when one step was enough: an untrusting, a tightening, the
    # platform's own act, or a change sealed before proposals.
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    # Set before the body is sealed (the body's "at" is this time), so not auto_now_add.
    changed_at = models.DateTimeField(default=timezone.now)
    seq = models.PositiveBigIntegerField(unique=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)
    body = models.TextField(help_text="RFC 8785 canonical JSON: what the hash and signature cover.")
    key_id = models.CharField(max_length=32)
    signature = models.TextField()

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        if self.kind != self.Kind.TRUST:
            return f"{self.subject} {self.name}: {self.get_kind_display().lower()}"
        return f"{self.subject} {self.name}: {'trusted' if self.trusted else 'untrusted'}"


class TrustProposal(models.Model):
    """A governance admin's proposal to loosen Warrant's hold on a tool or a tool source: to mark it
    trusted (kind "trust": a tool source or a built-in tool), to loosen its approval (kind
    "approval": lift a tool's requires_approval, change or clear a tool's or a source's approver
    role; `change` is what it sets, `was` the approval as it stood then), or to re-approve what a
    trusted source's held tool now says (kind "change": `change` the pending change's fingerprint,
    `was` the approved one). It changes nothing: only a
    different governance admin's confirmation writes it (agents.trust, agents.trust_approval); the
    TrustChange sealed for a mark, and the confirmed proposal itself, name both. Withdrawn by its
    proposer, refused by another admin, or left to expire at `expires_at`
    (WARRANT["TRUST_PROPOSAL_HOURS"] after it was made)."""

    class Kind(models.TextChoices):
        TRUST = "trust", "Mark it trusted"
        APPROVAL = "approval", "Loosen its approval"
        CHANGE = "change", "Re-approve its change"

    class Outcome(models.TextChoices):
        PENDING = "pending", "Pending"
        CONFIRMED = "confirmed", "Confirmed"
        REFUSED = "refused", "Refused"
        WITHDRAWN = "withdrawn", "Withdrawn"
        EXPIRED = "expired", "Expired"  # set when a new proposal of the same mark replaces it

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TRUST)
    subject = models.CharField(max_length=16, choices=TrustChange.Subject.choices)
    name = models.CharField(max_length=64)
    # kind "approval": the fields it sets ({"requires_approval": false, "approver_role": "name" or null}),
    # and the approval as it was when proposed; kind "change": {"sha256": the held change's fingerprint}
    # and {"approved_sha256": the approved one}. Confirming is refused if the target no longer is as `was` says.
    change = models.JSONField(default=dict, blank=True)
    was = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The proposer's roles when they proposed, sealed with the change if it is confirmed.
    proposer_roles = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    # The seq of the sealed TrustChange its confirmation made (null: none, or the mark was set already).
    change_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["kind", "subject", "name"], condition=models.Q(outcome="pending"),
                                               name="one_pending_proposal_of_each_kind")]

    @property
    def state(self) -> str:
        """The outcome, or "expired" for a pending proposal past its expiry."""
        if self.outcome == self.Outcome.PENDING and timezone.now() >= self.expires_at:
            return "expired"
        return self.outcome

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} {self.name}: {self.state}"
