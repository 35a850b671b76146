"""Telling people about approval requests: raised, approved short of its quorum, escalated, about
to expire, decided.

Who is told: for a request that waits (raised, recorded, escalated, expiring), the active members of its
approver role with an email address who may decide it now (runs.approvals.check_approval_decide:
never the run's caller, nor anyone the caller set up, nor anyone who already decided); for a
decision, the run's caller. An optional webhook gets the same facts (runs.notify_webhook).

What they are told: the request's kind and tool, the agent, the run and request ids, the role,
the deadline and a link to the workbench. Never the arguments: a message is read where the
workbench's access rules do not reach (a forwarded mail, a chat channel fed by the webhook), so
it carries only what says where to look, and the page it links to shows the rest to those who
may see the request.

When: after the transaction that raised, moved or closed the request commits
(transaction.on_commit), so a rolled-back park tells no one. The notice is made from the request as
that transaction left it: a decision is final, and a waiting request is checked again then (one
small read: still pending, with the same role and count, else read again whole), so a request
decided in the meantime is not announced as waiting. Only a reminder, which has nothing in
memory, reads the request whole (read_request). Sending never raises into a run or a decision: a mail
server or webhook that fails is logged and counted (FAILURES), and the failed notice is recorded
(runs.notice_models.NoticeRetry) for the reconciler to send again with backoff (runs.notify_retry).

Settings (warrant/mail_config.py): Django's EMAIL_* and DEFAULT_FROM_EMAIL; WARRANT_PUBLIC_URL, the
address people reach the workbench at (links need it absolute); WARRANT_NOTIFY_REMIND_SECONDS, the
longest lead of a reminder (3600: the lead is 10% of the request's time to live, at most this).
"""

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery
from django.db.models.fields.json import KT
from django.urls import reverse
from django.utils import timezone

from runs import notify_webhook
from runs.notify_webhook import setting
from runs.models import ApprovalDecision, ApprovalRequest, Run

logger = logging.getLogger(__name__)

# Sends and failures in this process, by channel ("mail", "webhook"; "notify": a notice that failed
# before anything was sent): what the logs say, in numbers a test or a shell can read.
FAILURES: Counter = Counter()
SENT: Counter = Counter()

RAISED, RECORDED, ESCALATED, EXPIRING, DECIDED = "requested", "recorded", "escalated", "expiring", "decided"
REMIND_FRACTION = 0.1


def public_url() -> str:
    return setting("WARRANT_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")


def _remind_cap_seconds() -> float:
    return setting("WARRANT_NOTIFY_REMIND_SECONDS", 3600.0)


# --- the events: each one line at its call site, in the transaction that made the change ---------


def approval_raised(approval: ApprovalRequest) -> None:
    """A request was created (a parked call, or a budget extension): its approvers are told."""
    _after_commit(RAISED, approval)


def approval_recorded(approval: ApprovalRequest, *, by) -> None:
    """An approval landed short of the quorum: the others who may still decide learn that one of N
    approved, and who."""
    _after_commit(RECORDED, approval, by=by.get_username())


def approval_escalated(approval: ApprovalRequest) -> None:
    """A request moved to its escalation role: that role's members are told."""
    _after_commit(ESCALATED, approval)


def approval_decided(approval: ApprovalRequest) -> None:
    """A request closed approved, denied or expired: the run's caller is told."""
    if approval.status in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.DENIED,
                           ApprovalRequest.Status.EXPIRED):
        _after_commit(DECIDED, approval)


def remind_expiring(now=None) -> int:
    """Remind the approvers of pending requests that expire within their lead time (10% of the
    request's time to live, at most WARRANT_NOTIFY_REMIND_SECONDS); each request once. The
    reconciler's work (runs.reconcile): `now` is its clock."""
    now = now or timezone.now()
    cap = _remind_cap_seconds()
    due = ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, reminded_at__isnull=True,
                                         expires_at__gt=now, expires_at__lte=now + timedelta(seconds=cap))
    reminded = 0
    for approval_id, created_at, expires_at in due.values_list("id", "created_at", "expires_at"):
        lead = min(cap, (expires_at - created_at).total_seconds() * REMIND_FRACTION)
        if (expires_at - now).total_seconds() > lead:
            continue
        # Conditional: of two reconcilers (or a tick and a decision) at once, one reminds.
        if ApprovalRequest.objects.filter(id=approval_id, status=ApprovalRequest.Status.PENDING,
                                          reminded_at__isnull=True).update(reminded_at=now):
            reminded += 1
            transaction.on_commit(lambda approval_id=approval_id: _send(EXPIRING, approval_id), robust=True)
    return reminded


# --- who, what, and sending ----------------------------------------------------------------------


def _after_commit(event: str, approval: ApprovalRequest, by: str = "") -> None:
    transaction.on_commit(lambda: _send(event, approval.pk, by, known=approval), robust=True)


def _send(event: str, approval_id, by: str = "", *, known: ApprovalRequest | None = None) -> None:
    try:
        if known is not None and event != DECIDED:
            approval, users = _waiting(known)
        else:
            approval = read_request(approval_id) if known is None else known  # a closed request stays closed
            users = [] if approval is None else recipients(event, approval)
        if approval is None or (event != DECIDED and approval.status != ApprovalRequest.Status.PENDING):
            return  # decided (or gone) before the news went out: nothing is waiting any more
        users = [user for user in users if user.is_active and user.email]
        failed = mail(event, [(user, message(event, approval, user, by=by)) for user in users])
        problems: list[str] = []
        if not notify_webhook.deliver(facts(event, approval, by=by), counts=(SENT, FAILURES), problems=problems) \
                and problems:
            failed.append((None, problems[0]))
        if failed:
            _keep_for_retry(event, approval, failed, by=by)
    except Exception:  # a notification never breaks the run or the decision it follows
        FAILURES["notify"] += 1
        logger.exception("notify: the %s notice for approval %s failed", event, approval_id)


def recipients(event: str, approval: ApprovalRequest) -> list:
    """Who `event` tells: the run's caller of a decision, else who may decide the request now."""
    return [approval.run.caller] if event == DECIDED else approvers(approval)


RETRY_FIRST_SECONDS = 60


def _keep_for_retry(event: str, approval: ApprovalRequest, failed: list, *, by: str) -> None:
    """Record each failed send (a mail's recipient, or None for the webhook) for runs.notify_retry."""
    from runs.notice_models import NoticeRetry

    first = timezone.now() + timedelta(seconds=RETRY_FIRST_SECONDS)
    NoticeRetry.objects.bulk_create([
        NoticeRetry(approval_id=approval.pk, event=event, recipient=user, by=by, next_attempt_at=first,
                    channel=NoticeRetry.Channel.MAIL if user is not None else NoticeRetry.Channel.WEBHOOK,
                    last_error=error[:300])
        for user, error in failed])


def _waiting(known: ApprovalRequest) -> tuple[ApprovalRequest | None, list]:
    """The request a waiting notice (raised, recorded, escalated) speaks of and who may decide it now. `known` is the
    request as the transaction that just committed left it: its approvers are asked for in one
    statement that finds them only while the request still stands so (pending, its role, its
    count). Nobody found, it moved on since or nobody may decide it: it is read again (_as_now)."""
    from runs.approvals import deciders  # it imports this module

    still = ApprovalRequest.objects.filter(pk=known.pk, status=ApprovalRequest.Status.PENDING,
                                           approver_role_id=known.approver_role_id,
                                           approvals_count=known.approvals_count)
    if found := deciders(known, _reachable(known).filter(Exists(still))):
        return known, found
    approval = _as_now(known)
    return approval, [] if approval is None else approvers(approval)


def _as_now(known: ApprovalRequest) -> ApprovalRequest | None:
    """`known` if a waiting notice would say the same of it now; else the request read again (None
    if gone or decided)."""
    now = (ApprovalRequest.objects.filter(pk=known.pk)
           .values_list("status", "approver_role_id", "approvals_count").first())
    if now is None or now[0] != ApprovalRequest.Status.PENDING:
        return None  # decided (or gone) since
    return known if now == (known.status, known.approver_role_id, known.approvals_count) else read_request(known.pk)


def read_request(approval_id) -> ApprovalRequest | None:
    """The request with what a notice reads of it, in one statement: its run, agent and caller,
    its roles, its decider, and the caller the run's frozen snapshot names (for the
    separation-of-duties check) without the snapshot itself."""
    approval = (ApprovalRequest.objects.select_related("run__agent", "run__caller", "approver_role",
                                                       "escalated_from_role", "decided_by")
                .defer("run__state", "run__snapshot", "arguments", "model_rationale")
                .annotate(snapshot_caller=Subquery(Run.objects.filter(pk=OuterRef("run_id"))
                                                   .values(frozen_caller=KT("snapshot__caller__username"))[:1]))
                .filter(id=approval_id).first())
    if approval is not None:
        approval.run.snapshot_caller = approval.snapshot_caller
    return approval


def approvers(approval: ApprovalRequest) -> list:
    """The people who may decide `approval` now and have an email address, by the rule a decision
    is checked against."""
    # runs.approvals calls into this module; its rule is imported where it is used.
    from runs.approvals import deciders

    return deciders(approval, _reachable(approval))


def _reachable(approval: ApprovalRequest):
    """The members of the request's role a mail can reach."""
    return approval.approver_role.user_set.filter(is_active=True).exclude(email="")


def _what(approval: ApprovalRequest) -> str:
    if approval.kind == ApprovalRequest.Kind.BUDGET:
        return "a budget extension"
    return f"the tool call {approval.tool}"


def facts(event: str, approval: ApprovalRequest, *, by: str = "") -> dict:
    """What every notice of `event` may say: no arguments, no model text, no budget figures."""
    run = approval.run
    said = {"approved_by": by} if event == RECORDED else {}
    return said | {
        "event": f"approval.{event}", "approval_id": str(approval.pk), "run_id": str(run.pk),
        "kind": approval.kind, "tool": approval.tool, "agent": run.agent.slug,
        "approver_role": approval.approver_role.name,
        "escalated_from_role": approval.escalated_from_role.name if approval.escalated_from_role else None,
        "status": approval.status, "quorum": approval.quorum, "approvals": approval.approvals_count,
        "expires_at": approval.expires_at.isoformat(),
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "link": approval_link(approval.pk) if event != DECIDED else run_link(run.pk),
    }


def approval_link(approval_id) -> str:
    return public_url() + reverse("admin:runs_approvalrequest_change", args=[approval_id])


def run_link(run_id) -> str:
    return public_url() + reverse("admin:runs_run_change", args=[run_id])


_SUBJECTS = {
    RAISED: "Approval needed: {what} for run {run}",
    RECORDED: "{count} of {quorum} approvals: {what} for run {run}",
    ESCALATED: "Escalated to {role}: {what} for run {run}",
    EXPIRING: "Expires soon: {what} for run {run}",
    DECIDED: "{status}: {what} for your run {run}",
}


def message(event: str, approval: ApprovalRequest, user, *, by: str = "") -> EmailMessage:
    run, what = approval.run, _what(approval)
    subject = "[Warrant] " + _SUBJECTS[event].format(
        what=what, run=str(run.pk)[:8], role=approval.approver_role.name, status=approval.status.capitalize(),
        count=approval.approvals_count, quorum=approval.quorum)
    lines = [f"Hello {user.get_username()},", ""]
    if event == DECIDED:
        lines += [f"The request for {what} in your run was {approval.status}{_by(approval)}.", ""]
        if approval.reason:
            lines += [f"Reason: {approval.reason}", ""]
    elif event == ESCALATED:
        origin = approval.escalated_from_role.name if approval.escalated_from_role else "its first role"
        lines += [f"No one in {origin} decided in time: {what} now waits for {approval.approver_role.name}.", ""]
    elif event == RECORDED:
        left = approval.quorum - approval.approvals_count
        lines += [f"{by or 'Someone'} approved {what}: {approval.approvals_count} of {approval.quorum} approvals. "
                  f"It waits for {left} more from {approval.approver_role.name}; one denial denies it.", ""]
    elif event == EXPIRING:
        lines += [f"{what[0].upper()}{what[1:]} still waits for a decision, and expires soon.", ""]
    else:
        lines += [f"{what[0].upper()}{what[1:]} waits for a decision by {approval.approver_role.name}.", ""]
    lines += [f"Agent:    {run.agent.slug}", f"Run:      {run.pk}", f"Request:  {approval.pk}"]
    if approval.kind == ApprovalRequest.Kind.TOOL_CALL:
        lines.append(f"Tool:     {approval.tool}")
    lines.append(f"Role:     {approval.approver_role.name}"
                 + (f" ({approval.approvals_count} of {approval.quorum} approvals)" if approval.quorum > 1 else ""))
    if event == DECIDED:
        lines += ["", f"The run in the workbench: {run_link(run.pk)}",
                  f"In the API: {public_url()}{reverse('run-detail', args=[run.pk])}"]
    else:
        lines += [f"Expires:  {approval.expires_at:%Y-%m-%d %H:%M} UTC (an expired request counts as denied)", "",
                  f"The request in the workbench: {approval_link(approval.pk)}",
                  f"The approval queue: {public_url()}{reverse('admin:runs_approval_queue')}#approval-{approval.pk}",
                  "", "The call's arguments are on the request's page, not in this message."]
    return EmailMessage(subject=subject, body="\n".join(lines) + "\n", from_email=settings.DEFAULT_FROM_EMAIL,
                        to=[user.email])


def _by(approval: ApprovalRequest) -> str:
    """Who decided: every approver a quorum counted (as the role that closed it), else the decider."""
    if approval.status == ApprovalRequest.Status.APPROVED and approval.quorum > 1:
        names = list(ApprovalDecision.objects.filter(
            approval_id=approval.pk, decision=ApprovalDecision.Decision.APPROVED, role=approval.approver_role.name)
            .order_by("created_at", "id").values_list("username", flat=True))
        if names:
            return " by " + ", ".join(names)
    return f" by {approval.decided_by.get_username()}" if approval.decided_by else ""


def mail(event: str, messages: list[tuple]) -> list[tuple]:
    """Send (user, message) pairs, one message per recipient (no one learns who else was told); a
    failure costs that one. The (user, why) of each that was not sent."""
    if not messages:
        return []
    try:
        # Django's EMAIL_TIMEOUT (warrant/mail_config.py), or 10 s where none is set: a notice
        # never waits on a silent mail server for ever.
        connection = get_connection(timeout=getattr(settings, "EMAIL_TIMEOUT", None) or 10)
        connection.open()
    except Exception as exc:  # a mail server that is down is the deployment's state, not a bug: no traceback
        FAILURES["mail"] += len(messages)
        logger.warning("notify: no mail connection for the %s notice (%d message(s) not sent): %s: %s", event,
                       len(messages), type(exc).__name__, exc)
        return [(user, f"no mail connection: {type(exc).__name__}: {exc}") for user, _ in messages]
    failed = []
    try:
        for user, email in messages:
            try:
                connection.send_messages([email])
                SENT["mail"] += 1
            except Exception as exc:
                FAILURES["mail"] += 1
                logger.warning("notify: the %s mail was not sent: %s: %s", event, type(exc).__name__, exc)
                failed.append((user, f"{type(exc).__name__}: {exc}"))
    finally:
        try:
            connection.close()
        except Exception:
            logger.warning("notify: closing the mail connection failed", exc_info=True)
    return failed
