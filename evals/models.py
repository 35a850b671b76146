"""Golden cases (what must happen for an input and a caller's roles) and eval runs (a set of them run
in isolation, with one result per case)."""

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models

from agents.models import Agent
from core.proposals import Proposal
from runs.states import ErrorCode, StopReason


class Expected(models.TextChoices):
    SUCCEEDED = "succeeded"
    BLOCKED = "blocked"
    AWAITING_APPROVAL = "awaiting_approval"
    STOPPED = "stopped"
    FAILED = "failed"


class Decision(models.TextChoices):
    """What the case's approver answers when the run parks: nothing (the case ends parked), or a
    decision, after which the run goes on (an approved side effect goes to the sandbox)."""

    NONE = "", "none: the case ends parked"
    APPROVE = "approve"
    DENY = "deny"


def _names(value) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError("a list of non-empty strings")


def unknown_roles(roles) -> list[str]:
    """The names in `roles` no role has (a typo would leave the case's caller granted nothing)."""
    if not isinstance(roles, list):
        return []
    known = set(Group.objects.filter(name__in=roles).values_list("name", flat=True))
    return [role for role in roles if role not in known]


class GoldenCase(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="golden_cases")
    name = models.SlugField(max_length=80, help_text="Unique for its agent.")
    description = models.TextField(blank=True)
    input = models.TextField()
    roles = models.JSONField(default=list, validators=[_names],
                             help_text="The caller's roles: the case runs as a synthetic caller in exactly these.")
    decision = models.CharField(max_length=8, choices=Decision.choices, blank=True, default="")
    expected_status = models.CharField(max_length=20, choices=Expected.choices)
    awaiting_tool = models.CharField(max_length=128, blank=True,
                                     help_text="For awaiting_approval: the tool the run must park on.")
    stop_reason = models.CharField(max_length=32, blank=True, choices=[(r.value, r.value) for r in StopReason],
                                   help_text="For stopped: the stop reason.")
    error = models.CharField(max_length=32, blank=True, choices=[(c.value, c.value) for c in ErrorCode],
                             help_text="For failed: the error code.")
    tools_called = models.JSONField(default=list, blank=True, validators=[_names],
                                    help_text="Tools that must be called (and have run).")
    tools_not_called = models.JSONField(default=list, blank=True, validators=[_names],
                                        help_text="Tools that must not be called at all.")
    output_contains = models.JSONField(default=list, blank=True, validators=[_names])
    output_excludes = models.JSONField(default=list, blank=True, validators=[_names])
    policies_fired = models.JSONField(default=list, blank=True, validators=[_names],
                                      help_text="Names of policies that must fire.")
    enabled = models.BooleanField(default=True)
    # What the read-only tools answered when the case was recorded: [{tool, arguments, result}]. Written
    # only by recording (evals.recordings), never by hand, so a fixture is always what a tool returned.
    recordings = models.JSONField(default=list, blank=True, editable=False,
                                  help_text="The read-only tools' results the case runs against (see Record).")
    recorded_at = models.DateTimeField(null=True, blank=True, editable=False)
    recorded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, editable=False,
                                    on_delete=models.SET_NULL, related_name="+")
    version = models.PositiveIntegerField(default=1, editable=False,
                                          help_text="Raised by every change, a recording included (see its versions).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="golden_case_name_per_agent")]

    def __str__(self) -> str:
        return f"{self.agent.slug}/{self.name}"

    def clean(self) -> None:
        problems = {}
        if self.awaiting_tool and self.expected_status != Expected.AWAITING_APPROVAL:
            problems["awaiting_tool"] = "only for expected status awaiting_approval"
        if self.stop_reason and self.expected_status != Expected.STOPPED:
            problems["stop_reason"] = "only for expected status stopped"
        if self.error and self.expected_status != Expected.FAILED:
            problems["error"] = "only for expected status failed"
        if self.decision and self.expected_status == Expected.AWAITING_APPROVAL:
            problems["decision"] = "a case that decides cannot end parked"
        if unknown := unknown_roles(self.roles):
            problems["roles"] = f"no role named {unknown[0]!r}"
        if problems:
            raise ValidationError(problems)


class GoldenCaseVersion(models.Model):
    """One change of a golden case (made, edited, recorded, deleted): who, when, and every value after it."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        RECORD = "record"
        DELETE = "delete"

    case = models.ForeignKey(GoldenCase, null=True, on_delete=models.SET_NULL, related_name="versions")
    agent_slug = models.SlugField(max_length=64)
    case_name = models.SlugField(max_length=80)
    version = models.PositiveIntegerField()
    action = models.CharField(max_length=8, choices=Action.choices)
    values = models.JSONField(default=dict, help_text="The case as this change left it (recordings included).")
    note = models.CharField(max_length=300, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Who made the change: for a proposed one, its approver.")
    # Who proposed a change that changed_by approved (GoldenCaseProposal); null when one step was enough:
    # a new case, the platform's own act (load_demo), or a change made before proposals.
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"{self.agent_slug}/{self.case_name} v{self.version} ({self.action})"


class GoldenCaseProposal(Proposal):
    """A governance admin's change of a golden case that could loosen the gate (an edit, a deletion, a
    recording). It changes nothing and the gate ignores it: only a different governance admin's
    approval applies it (evals.proposals), and the version written then names both. Refused by
    another admin, withdrawn by its proposer; stale once the case changed since it was made."""

    class Kind(models.TextChoices):
        UPDATE = "update"
        DELETE = "delete"
        RECORD = "record"

    case = models.ForeignKey(GoldenCase, null=True, on_delete=models.SET_NULL, related_name="proposals")
    agent_slug = models.SlugField(max_length=64)
    case_name = models.SlugField(max_length=80)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    base_version = models.PositiveIntegerField(help_text="The case's version the change was proposed against.")
    changes = models.JSONField(default=dict, help_text="For an update: the fields and their new values; for a "
                                                       "recording: the recordings made against the live data.")
    note = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.agent_slug}/{self.case_name} by {self.proposed_by} ({self.status})"


class Purpose(models.TextChoices):
    SET = "set", "the golden set as in force"
    GATE = "gate", "the gate of a policy draft or a skill's activation"
    LAB = "lab", "the Policy Lab's trial of an unsaved draft"


class EvalRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_runs",
                              help_text="Empty: every agent's cases.")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="eval_runs")
    profile = models.CharField(max_length=64, blank=True, help_text="The model profile used; empty: each agent's own.")
    threshold = models.FloatField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    pass_rate = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    purpose = models.CharField(max_length=8, choices=Purpose.choices, default=Purpose.SET)
    subject = models.CharField(max_length=200, blank=True,
                               help_text="For a gate or a trial: what was put in place (policy draft 12, skill x v3, ...).")
    report = models.JSONField(null=True, blank=True,
                              help_text="For a gate or a trial: each case before and after the change, and which changed.")

    class Meta:
        ordering = ["-created_at"]
        # Who may run evals: governance admins (by this permission) and compliance (by its role).
        default_permissions = ("add", "view")

    def __str__(self) -> str:
        return f"eval run {self.id} ({self.status})"


class EvalResult(models.Model):
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(GoldenCase, null=True, on_delete=models.SET_NULL, related_name="results")
    # As the case was when it ran: a case edited or deleted later leaves the result readable.
    agent_slug = models.SlugField(max_length=64)
    case_name = models.SlugField(max_length=80)
    case_version = models.PositiveIntegerField(null=True, blank=True, help_text="The case's version that ran.")
    expected = models.JSONField(default=dict)
    passed = models.BooleanField()
    status = models.CharField(max_length=20, help_text="The status the case's run ended in.")
    output = models.TextField(blank=True)
    failures = models.JSONField(default=list, help_text="Each failed expectation: expectation, expected, actual.")
    actual = models.JSONField(default=dict, help_text="What happened: tools called, policies fired, parked tool, ...")
    sandbox = models.JSONField(default=list, help_text="Side-effect calls the sandbox answered instead of the tool.")
    trace = models.JSONField(default=list, help_text="The events the harness's steps returned, redacted as a run's.")
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["eval_run", "id"]
        default_permissions = ("view",)
