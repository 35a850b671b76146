"""A notice that failed, kept so the reconciler sends it again (runs.notify_retry).

Beside runs.models, which imports it, so that Django finds it with the app's other models.
"""

from django.conf import settings
from django.db import models


class NoticeRetry(models.Model):
    """One notice (a mail to one person, or the webhook) whose send failed: what it was, how often
    it was tried, when it is tried next, and how it ended. Nothing of the message is kept: a retry
    renders it again from the request as it is then, so it says what is true when it is sent."""

    class Channel(models.TextChoices):
        MAIL = "mail"
        WEBHOOK = "webhook"

    class State(models.TextChoices):
        WAITING = "waiting", "waiting: tried again at next_attempt_at"
        SENT = "sent", "sent on a retry"
        DROPPED = "dropped", "dropped: no longer true or no longer theirs to hear"
        GAVE_UP = "gave_up", "gave up after the last attempt"

    approval = models.ForeignKey("runs.ApprovalRequest", on_delete=models.CASCADE, related_name="notice_retries")
    event = models.CharField(max_length=16)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    # The mail's recipient; none for the webhook.
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                                  related_name="+")
    # For a partial approval's notice: who approved (the message names them).
    by = models.CharField(max_length=150, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.WAITING)
    attempts = models.PositiveSmallIntegerField(default=1, help_text="Sends tried so far, the first one included.")
    next_attempt_at = models.DateTimeField()
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} {self.channel} for approval {self.approval_id}: {self.state}"
