"""Skills: procedures written as SKILL.md, parsed into rows, loaded into a run on demand."""

from django.conf import settings
from django.db import models


class Skill(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft (not used by runs)"
        APPROVED = "approved", "Approved (reviewed, not yet used by runs)"
        ACTIVE = "active", "Active (reaches runs)"
        RETIRED = "retired", "Retired"

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField()
    tags = models.JSONField(default=list, blank=True)
    allowed_tools = models.JSONField(
        default=list, blank=True, help_text="The contract: tools a run may call while this skill is active."
    )
    inputs = models.JSONField(default=dict, blank=True, help_text="The contract: what the skill needs, by name.")
    outputs = models.JSONField(default=dict, blank=True, help_text="The contract: what the skill produces, by name.")
    side_effects = models.JSONField(default=list, blank=True, help_text="The contract: what it may change in the world.")
    body = models.TextField()
    version = models.PositiveIntegerField(default=1)
    sha256 = models.CharField(max_length=64, help_text="Of the SKILL.md text this row was parsed from.")
    source = models.TextField(help_text="The SKILL.md text as imported.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                               help_text="Who imported the current text; may not approve it.")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    emergency_reason = models.TextField(
        blank=True, editable=False,
        help_text="Set when this version was activated without a passing golden set; runs freeze it with the skill.")
    # An emergency activation (or removal) asked for and not yet confirmed by a second governance admin: bound to
    # the text it was asked for (sha256), cleared when the change is made or the skill's text changes.
    emergency_request_reason = models.TextField(blank=True, editable=False)
    emergency_request_sha256 = models.CharField(max_length=64, blank=True, editable=False)
    # What the request is for: "" an activation; a removal of the version in force, the status it leaves and,
    # for new text, that text's sha256 (skills.gate.removal_action).
    emergency_request_action = models.CharField(max_length=100, blank=True, editable=False)
    emergency_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, editable=False,
                                               on_delete=models.SET_NULL, related_name="+")
    emergency_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def spec(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
            "allowed_tools": list(self.allowed_tools),
            "inputs": dict(self.inputs),
            "outputs": dict(self.outputs),
            "side_effects": list(self.side_effects),
            "body": self.body,
            "version": self.version,
            "sha256": self.sha256,
        } | ({"emergency": self.emergency_reason} if self.emergency_reason else {})


class SkillVersion(models.Model):
    """One row per change of a skill: the SKILL.md text as it was saved, by whom and when."""

    skill = models.ForeignKey(Skill, null=True, on_delete=models.SET_NULL, related_name="history")
    skill_name = models.CharField(max_length=64)
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Skill.Status.choices)
    source = models.TextField()
    sha256 = models.CharField(max_length=64)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    changed_at = models.DateTimeField(auto_now_add=True)
    # An activation's or a removal's gate: its eval run (evals.EvalRun), and why it was let past a failing set.
    eval_run_id = models.UUIDField(null=True, blank=True)
    emergency_reason = models.TextField(blank=True)
    # An emergency activation or removal: who asked for it (changed_by is the second admin who confirmed it).
    emergency_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                               on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.skill_name} v{self.version} ({self.status})"
