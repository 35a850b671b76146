"""The orchestrator's tables. A run's status is written only by runs.lifecycle; receipts only by runs.receipts."""

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from agents.models import Agent, AgentVersion
from runs.states import ErrorCode, RunStatus, StopReason


class Run(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    agent_version = models.ForeignKey(AgentVersion, on_delete=models.PROTECT, related_name="runs")
    caller = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    caller_roles = models.JSONField(default=list)
    input = models.TextField()
    output = models.TextField(blank=True)
    status = models.CharField(max_length=24, choices=[(s.value, s.value) for s in RunStatus], default=RunStatus.QUEUED)
    stop_reason = models.CharField(max_length=24, blank=True, choices=[(s.value, s.value) for s in StopReason])
    error = models.CharField(max_length=24, blank=True, choices=[(e.value, e.value) for e in ErrorCode])
    error_message = models.TextField(blank=True)
    # What the run was refused (denials, expiries, calls refused at call time, budget stops
    # refused an extension): a run that did not do all it set out to do says so.
    refused_count = models.PositiveSmallIntegerField(default=0)
    refused_kinds = models.JSONField(default=list, blank=True, help_text="The kinds of refusals, sorted, each once.")
    tainted = models.BooleanField(default=False)
    taint_reason = models.TextField(blank=True)
    # The frozen governance of this run: what it was allowed to do, fixed at start.
    snapshot = models.JSONField(default=dict)
    policy_snapshot_sha256 = models.CharField(max_length=64, blank=True)
    # The harness state (messages, pending calls, usage): the whole checkpoint.
    state = models.JSONField(default=dict)
    step = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    deliveries = models.PositiveIntegerField(default=0, help_text="Claims of the current step; bounded.")
    # The seq of the run's last trace event. Every writer of events takes the next numbers by
    # incrementing it (which locks the row), in the transaction that inserts them.
    event_seq = models.PositiveIntegerField(default=0)
    # "seq:hash" of the trace's last event, written by the same statement that moves event_seq on
    # (runs.lifecycle), so a writer that reads the row has the link its next event chains to
    # without reading the events. A value whose seq is not event_seq (a row written before this
    # column, or by an older process) is not used: the link is then read from the events.
    trace_tip = models.CharField(max_length=80, blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    llm_calls = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    deadline_at = models.DateTimeField(null=True, blank=True)
    status_changed_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"]),
            models.Index(fields=["status", "status_changed_at"]),
            models.Index(fields=["refused_count", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        from runs.states import TERMINAL

        return self.status in TERMINAL


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ValidationError(f"{self.model.__name__} rows are append-only")

    def delete(self):
        raise ValidationError(f"{self.model.__name__} rows are append-only")


class AppendOnlyModel(models.Model):
    """Rows that are written once and never changed or removed."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError(f"{type(self).__name__} rows are append-only")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError(f"{type(self).__name__} rows are append-only")


class RunEvent(AppendOnlyModel):
    """The trace of a run, in order: every step, model call, tool call, decision and approval."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="events")
    seq = models.PositiveIntegerField()
    step = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=32)
    data = models.JSONField(default=dict)
    # sha256(previous event's hash + JCS({seq, step, kind, data})): the run's trace is a chain
    # whose head the receipt signs, so an event edited, blanked or removed later is detected.
    hash = models.CharField(max_length=64, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_seq_unique")]

    def __str__(self) -> str:
        return f"{self.run_id} #{self.seq} {self.kind}"


class ApprovalRequest(models.Model):
    """A question to people: may this call run (kind tool_call), or may this run have more
    budget (kind budget). Decided by `quorum` distinct members of `approver_role`; one denial
    denies. Escalation moves it to `escalate_to_role` at `escalate_at` (runs.approvals)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        TOOL_CALL = "tool_call"
        BUDGET = "budget"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="approvals")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TOOL_CALL)
    step = models.PositiveIntegerField()
    call_id = models.CharField(max_length=64)
    tool = models.CharField(max_length=64)
    arguments = models.JSONField()
    arguments_sha256 = models.CharField(max_length=64, help_text="sha256(run_id, step, tool, canonical arguments)")
    policy_id = models.IntegerField(null=True)
    policy_version = models.PositiveIntegerField(null=True)
    policy_name = models.CharField(max_length=128, blank=True)
    approver_role = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="approval_requests")
    reasons = models.JSONField(default=list, help_text="Why the harness parked this call.")
    model_rationale = models.TextField(blank=True, help_text="What the model wrote. Untrusted.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_via = models.CharField(
        max_length=64, blank=True,
        help_text="How the decider authenticated: 'session', or 'token:' and the token's public id.")
    reason = models.TextField(blank=True)
    quorum = models.PositiveSmallIntegerField(default=1, help_text="Distinct approvals needed.")
    approvals_count = models.PositiveSmallIntegerField(default=0, help_text="Approvals recorded so far.")
    escalate_to_role = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    escalate_at = models.DateTimeField(null=True, blank=True, help_text="When it moves to escalate_to_role.")
    escalated_at = models.DateTimeField(null=True, blank=True)
    escalated_from_role = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    budget = models.JSONField(default=dict, blank=True, help_text="Kind budget: what was used and what is asked.")
    reminded_at = models.DateTimeField(null=True, blank=True, help_text="When its approvers were told it will expire.")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id", "arguments_sha256"], name="approval_one_per_call_digest")
        ]
        indexes = [models.Index(fields=["status", "expires_at"]), models.Index(fields=["status", "escalate_at"])]

    def __str__(self) -> str:
        return f"{self.tool or self.kind} for run {self.run_id} ({self.status})"


class ApprovalDecision(AppendOnlyModel):
    """One person's decision on a request: who, when, how they authenticated, and why."""

    class Decision(models.TextChoices):
        APPROVED = "approved"
        DENIED = "denied"

    approval = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT, related_name="decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    username = models.CharField(max_length=150, help_text="As it was at the time.")
    role = models.CharField(max_length=150, help_text="The role they decided as.")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason = models.TextField(blank=True)
    via = models.CharField(max_length=64, help_text="'session', or 'token:' and the token's public id.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["approval", "created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["approval", "user"], name="approval_decision_one_per_user")]

    def __str__(self) -> str:
        return f"{self.username} {self.decision} {self.approval_id}"


class StandingApproval(models.Model):
    """An approver's standing yes: `tool`, with arguments matching `arguments` (per argument,
    {"equals": value} or {"in": [values]}), runs without asking, for one agent or all, until it
    expires or is revoked. Granted only within the granter's role's authority (runs.standing)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool = models.CharField(max_length=64)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                              help_text="Empty = every agent.")
    arguments = models.JSONField(default=dict, help_text='Per argument: {"equals": v} or {"in": [v, ...]}.')
    role = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="+", help_text="The authority it stands on.")
    reason = models.TextField()
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    granted_via = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    revoke_reason = models.TextField(blank=True)
    uses = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tool", "expires_at"])]

    def __str__(self) -> str:
        return f"standing approval of {self.tool} ({self.id})"


class StandingApprovalUse(models.Model):
    """One call a standing approval answered: `uses` counts these, so a step delivered again
    after a crash, which looks the call up again, is not counted twice (runs.standing)."""

    standing = models.ForeignKey(StandingApproval, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    call_id = models.CharField(max_length=128)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["standing", "run", "call_id"], name="standing_use_once_per_call")]


class SideEffect(models.Model):
    """The outbox: a side-effecting call is recorded under its idempotency key before it runs.

    executing: claimed by a worker (claimed_by) until claim_expires_at, which its heartbeat
    renews; the call is in flight, outside any transaction. unknown: the worker died during the
    call, and the tool cannot be told to act at most once: it is not sent again (runs.outbox)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        EXECUTING = "executing"
        DONE = "done"
        FAILED = "failed"
        UNKNOWN = "unknown"

    idempotency_key = models.CharField(max_length=128, unique=True)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="side_effects")
    approval = models.ForeignKey(ApprovalRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    tool = models.CharField(max_length=64)
    arguments = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    claimed_by = models.CharField(max_length=64, blank=True, help_text="The worker executing the call.")
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.tool} {self.idempotency_key} ({self.status})"


class Receipt(AppendOnlyModel):
    """The sealed record of one finished run, chained to the one before it and signed.

    The signature (Ed25519, by a key that never lives in the database) covers the receipt's place
    in the chain and its hash, which covers the body: see docs/evidence.md."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="receipt")
    seq = models.PositiveIntegerField(unique=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)
    body = models.TextField(help_text="Canonical JSON (RFC 8785), byte for byte what the hash covers.")
    key_id = models.CharField(max_length=16, default="", help_text="The signing key's id (see receipts/keys/).")
    signature = models.CharField(max_length=88, default="", help_text="Ed25519, base64.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"receipt #{self.seq} for run {self.run_id}"


class ReceiptCheckpoint(AppendOnlyModel):
    """A signed statement of the chain's head at a moment: the witness's entry, kept here too.

    The same document goes to the witness sinks (runs.witness), outside the database, so a
    rewritten or truncated chain disagrees with a checkpoint its rewriter cannot delete or forge."""

    seq = models.PositiveIntegerField(unique=True)
    head = models.CharField(max_length=64, help_text="The hash of receipt #seq.")
    at = models.DateTimeField()
    key_id = models.CharField(max_length=16)
    signature = models.CharField(max_length=88)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-seq"]

    def __str__(self) -> str:
        return f"checkpoint of the chain at #{self.seq}"

    def document(self) -> dict:
        from runs.witness import checkpoint_document

        return checkpoint_document(seq=self.seq, head=self.head, at=self.at, key_id=self.key_id,
                                   signature=self.signature)


class WitnessSink(models.Model):
    """How far each witness sink has been given the chain, and its last failure: what /readyz reports."""

    name = models.CharField(max_length=16, unique=True)
    delivered_seq = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True, help_text="Set while the last attempt failed.")
    error = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"witness {self.name} at #{self.delivered_seq}"


class IdempotencyRecord(models.Model):
    """A POST answered under an Idempotency-Key: the same key and body get the stored answer."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress"
        DONE = "done"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=128)
    request_sha256 = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.IN_PROGRESS)
    response_status = models.PositiveSmallIntegerField(null=True)
    response_body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class ReceiptAccess(AppendOnlyModel):
    """Who looked at or took receipts, when, and which: the audit trail of the evidence itself."""

    class Action(models.TextChoices):
        LIST = "list", "listed"
        VIEW = "view", "viewed"
        VERIFY = "verify", "verified"
        VERIFY_CHAIN = "verify_chain", "verified the chain"
        EXPORT = "export", "exported"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    username = models.CharField(max_length=150, help_text="As it was at the time.")
    action = models.CharField(max_length=16, choices=Action.choices)
    channel = models.CharField(max_length=8, help_text="admin or api")
    format = models.CharField(max_length=8, blank=True, help_text="jsonl or csv, for exports")
    receipt_ids = models.JSONField(default=list)
    count = models.PositiveIntegerField(default=0)
    query = models.CharField(max_length=1000, blank=True, help_text="The filters or selection, as asked.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "receipt access"
        verbose_name_plural = "receipt access log"

    def __str__(self) -> str:
        return f"{self.username} {self.get_action_display()} {self.count} receipt(s)"


# In a module of its own (this one is near the size limit), imported here so Django finds it.
from runs.notice_models import NoticeRetry  # noqa: E402,F401
