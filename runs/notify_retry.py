"""Failed notices sent again: the reconciler's work (runs.reconcile), with backoff and a cap.

runs.notify records each send that failed (a mail to one person, or the webhook) as a
NoticeRetry, first due a minute later. Each reconciler tick sends the due ones again, at most
BATCH a tick so a mail server that hangs cannot hold the tick for long; a failure doubles the wait
(1, 2, 4 ... minutes, at most an hour) until MAX_ATTEMPTS sends were tried, then it gives up,
logged as an error. Nothing here runs in a park or a decision: those only record.

A retry renders the notice again from the request as it is now, and sends it only if it is still
true and still theirs: a waiting notice of a request decided since is dropped, and so is a mail to
someone who may no longer decide it (they decided, left the role) or is no longer the caller.
Of two reconcilers at once, one sends: a retry is claimed by a conditional update of its attempt
count before it is sent. A process that dies mid-send leaves the claim, so that notice is tried
again at its next time: a retry can be sent twice then, never lost.

Operators see them in the workbench (Notice retries) and in the log.
"""

import logging
from datetime import timedelta

from django.utils import timezone

from runs import notify, notify_webhook
from runs.notice_models import NoticeRetry

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 8  # the first send and seven retries: about two hours of backoff in all
BATCH = 20
MAX_WAIT_SECONDS = 3600


def wait_after(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed send a notice is tried again."""
    return timedelta(seconds=min(MAX_WAIT_SECONDS, notify.RETRY_FIRST_SECONDS * 2 ** (attempts - 1)))


def retry_due(now=None) -> dict:
    """Send the due retries again; {"sent", "failed", "dropped", "gave_up"} counts of this tick."""
    now = now or timezone.now()
    done = {"sent": 0, "failed": 0, "dropped": 0, "gave_up": 0}
    due = list(NoticeRetry.objects.filter(state=NoticeRetry.State.WAITING, next_attempt_at__lte=now)
               .select_related("recipient").order_by("next_attempt_at", "id")[:BATCH])
    for retry in due:
        attempts = retry.attempts + 1
        if not NoticeRetry.objects.filter(pk=retry.pk, state=NoticeRetry.State.WAITING,
                                          attempts=retry.attempts).update(
                attempts=attempts, next_attempt_at=now + wait_after(attempts)):
            continue  # another reconciler took it
        retry.attempts = attempts
        try:
            state, why = _send_again(retry)
        except Exception as exc:  # a bug or the database: counted as a failed attempt, never raised
            logger.exception("notify: retrying notice %s failed", retry.pk)
            state, why = None, f"{type(exc).__name__}: {exc}"
        if state is None and attempts >= MAX_ATTEMPTS:
            state = NoticeRetry.State.GAVE_UP
            logger.error("notify: gave up on the %s %s notice for approval %s after %d attempts: %s", retry.event,
                         retry.channel, retry.approval_id, attempts, why)
        key = {None: "failed", NoticeRetry.State.SENT: "sent", NoticeRetry.State.DROPPED: "dropped",
               NoticeRetry.State.GAVE_UP: "gave_up"}[state]
        done[key] += 1
        fields = {"last_error": (why or "")[:300]}
        if state is not None:
            fields["state"] = state
        NoticeRetry.objects.filter(pk=retry.pk).update(**fields, updated_at=timezone.now())
    return done


def _send_again(retry: NoticeRetry) -> tuple[str | None, str]:
    """(the state it ends in, or None to try again later; why)."""
    approval = notify.read_request(retry.approval_id)
    if approval is None:
        return NoticeRetry.State.DROPPED, "the request is gone"
    if retry.event != notify.DECIDED and approval.status != approval.Status.PENDING:
        return NoticeRetry.State.DROPPED, f"the request was {approval.status} since: nothing waits any more"
    if retry.channel == NoticeRetry.Channel.WEBHOOK:
        problems: list[str] = []
        if notify_webhook.deliver(notify.facts(retry.event, approval, by=retry.by),
                                  counts=(notify.SENT, notify.FAILURES), problems=problems):
            return NoticeRetry.State.SENT, ""
        if not problems:  # unset since, or refused by its own configuration: a retry cannot mend that
            return NoticeRetry.State.DROPPED, "the webhook is not configured to be sent to"
        return None, problems[0]
    user = retry.recipient
    if user is None or not user.is_active or not user.email:
        return NoticeRetry.State.DROPPED, "the recipient has no active account with an address"
    if user.pk not in {person.pk for person in notify.recipients(retry.event, approval)}:
        return NoticeRetry.State.DROPPED, "no longer someone this notice is for"
    failed = notify.mail(retry.event, [(user, notify.message(retry.event, approval, user, by=retry.by))])
    return (None, failed[0][1]) if failed else (NoticeRetry.State.SENT, "")
