"""An approval short of its quorum tells the others who may still decide; a notice that failed is
recorded and sent again by the reconciler with backoff, up to a cap (runs.notify_retry), and never
holds up the park or the decision it follows."""

import logging
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone

from governance import services as governance_services
from governance.models import Policy
from runs import notify, services
from runs.approvals import approval_decide
from runs.models import NoticeRetry, Run
from runs.notify_retry import MAX_ATTEMPTS, retry_due, wait_after
from tests import factories, loopback
from tests.runs.test_notify import PUBLIC, _parked, _public_url, _user  # noqa: F401 (_public_url: its autouse fixture)
from tests.runs.test_notify_webhook import Receiver

pytestmark = pytest.mark.django_db

DOWN_PORT = 8128  # this suite's block (8120-8129): nothing listens here


def _mail_down(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", DOWN_PORT


def _mail_up(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def two_of_secops(demo):
    for name in ("approver2", "approver3"):
        person = factories.approver(name)
        get_user_model().objects.filter(pk=person.pk).update(email=f"{name}@example.com")
    governance_services.policy_update(policy=Policy.objects.get(name="side-effects-need-secops"),
                                      values={"quorum": 2})


def test_an_approval_short_of_the_quorum_tells_the_others_who_may_decide(
        two_of_secops, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    assert sorted(m.to[0] for m in mail.outbox) == ["approver2@example.com", "approver3@example.com",
                                                     "approver@example.com"]
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=_user("approver"), approve=True, reason="ok", via="session")
    # Not the one who approved, not the caller: the two who may still decide.
    assert sorted(m.to[0] for m in mail.outbox) == ["approver2@example.com", "approver3@example.com"]
    message = mail.outbox[0]
    assert message.subject == f"[Warrant] 1 of 2 approvals: the tool call delete_account for run {str(approval.run_id)[:8]}"
    assert "approver approved the tool call delete_account: 1 of 2 approvals" in message.body
    assert "It waits for 1 more from secops" in message.body
    for value in approval.arguments.values():
        assert str(value) not in message.subject + message.body
    path = re.search(r"The request in the workbench: (\S+)", message.body).group(1)[len(PUBLIC):]
    browser = Client()
    browser.force_login(_user("approver2"))
    assert browser.get(path).status_code == 200

    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=_user("approver2"), approve=True, via="session")
    # The quorum closed it: the caller hears of the decision, and no one of a partial approval.
    assert [m.to for m in mail.outbox] == [["operator@example.com"]]
    assert mail.outbox[0].subject.startswith("[Warrant] Approved:")


def test_a_failed_mail_is_kept_and_sent_again_by_the_reconciler(demo, settings, django_capture_on_commit_callbacks):
    _mail_down(settings)
    approval = _parked(django_capture_on_commit_callbacks)
    assert Run.objects.get(id=approval.run_id).status == "awaiting_approval"  # the park did not wait on it
    [retry] = NoticeRetry.objects.all()
    assert (retry.event, retry.channel, retry.recipient.username, retry.state, retry.attempts) == (
        "requested", "mail", "approver", "waiting", 1)
    assert "ConnectionRefusedError" in retry.last_error
    assert retry_due(now=retry.next_attempt_at - timedelta(seconds=1)) == {"sent": 0, "failed": 0, "dropped": 0,
                                                                           "gave_up": 0}
    _mail_up(settings)
    assert retry_due(now=retry.next_attempt_at)["sent"] == 1
    [message] = mail.outbox
    assert message.to == ["approver@example.com"] and message.subject.startswith("[Warrant] Approval needed:")
    retry.refresh_from_db()
    assert (retry.state, retry.attempts, retry.last_error) == ("sent", 2, "")
    assert retry_due(now=retry.next_attempt_at + timedelta(days=1))["sent"] == 0  # sent once


def test_the_reconciler_retries_on_its_tick(demo, settings, django_capture_on_commit_callbacks):
    _mail_down(settings)
    _parked(django_capture_on_commit_callbacks)
    NoticeRetry.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    _mail_up(settings)
    assert services.run_reconcile()["notices_retried"]["sent"] == 1 and len(mail.outbox) == 1


def test_retries_back_off_and_give_up_at_the_cap(demo, settings, caplog, django_capture_on_commit_callbacks):
    _mail_down(settings)
    _parked(django_capture_on_commit_callbacks)
    retry = NoticeRetry.objects.get()
    waits = []
    while retry.state == "waiting":
        due = retry.next_attempt_at
        retry_due(now=due)
        retry.refresh_from_db()
        waits.append(retry.next_attempt_at - due)
    assert retry.state == "gave_up" and retry.attempts == MAX_ATTEMPTS
    minutes = [int(w.total_seconds() // 60) for w in waits[:-1]]
    assert minutes == [2, 4, 8, 16, 32, 60][:MAX_ATTEMPTS - 2]  # doubling, at most an hour
    assert wait_after(1) == timedelta(minutes=1)
    [gave_up] = [r for r in caplog.records if r.name == "runs.notify_retry" and r.levelno == logging.ERROR]
    assert "gave up on the requested mail notice" in gave_up.message
    assert retry_due(now=timezone.now() + timedelta(days=1))["failed"] == 0


def test_a_waiting_notice_of_a_request_decided_since_is_dropped(demo, settings, approver,
                                                                django_capture_on_commit_callbacks):
    _mail_down(settings)
    approval = _parked(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json").status_code == 200
    # The decision's own notice to the caller failed too: it is kept, and still true.
    assert sorted(NoticeRetry.objects.values_list("event", flat=True)) == ["decided", "requested"]
    _mail_up(settings)
    assert retry_due(now=timezone.now() + timedelta(minutes=2)) == {"sent": 1, "failed": 0, "dropped": 1,
                                                                    "gave_up": 0}
    assert NoticeRetry.objects.get(event="requested").state == "dropped"
    assert [m.to for m in mail.outbox] == [["operator@example.com"]]


def test_a_mail_to_someone_no_longer_in_the_role_is_dropped(demo, settings, django_capture_on_commit_callbacks):
    _mail_down(settings)
    _parked(django_capture_on_commit_callbacks)
    _user("approver").groups.clear()
    _mail_up(settings)
    assert retry_due(now=timezone.now() + timedelta(minutes=2))["dropped"] == 1 and mail.outbox == []


def test_two_reconcilers_send_a_retry_once(demo, settings, django_capture_on_commit_callbacks):
    _mail_down(settings)
    _parked(django_capture_on_commit_callbacks)
    retry = NoticeRetry.objects.get()
    _mail_up(settings)
    # The second read the row before the first claimed it: its claim on the old attempt count fails.
    stale = NoticeRetry.objects.get(pk=retry.pk)
    assert retry_due(now=retry.next_attempt_at)["sent"] == 1
    assert NoticeRetry.objects.filter(pk=stale.pk, state="waiting", attempts=stale.attempts).update(attempts=9) == 0
    assert len(mail.outbox) == 1


@pytest.fixture
def receiver(settings):
    # A port the system picks: two of these tests may run at once under xdist.
    with loopback.running(Receiver(0)) as server:
        settings.WARRANT_NOTIFY_WEBHOOK_URL = f"http://127.0.0.1:{server.server_address[1]}/warrant"
        settings.WARRANT_NOTIFY_WEBHOOK_SECRET = "s3cret-for-the-receiver"
        settings.WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS = ("127.0.0.1",)
        yield server


def test_a_webhook_that_failed_is_posted_again(demo, receiver, django_capture_on_commit_callbacks):
    receiver.answer = 503
    approval = _parked(django_capture_on_commit_callbacks)
    [retry] = NoticeRetry.objects.filter(channel="webhook")
    assert retry.recipient is None and retry.last_error == "answered 503"
    receiver.answer = 204
    assert retry_due(now=retry.next_attempt_at)["sent"] == 1
    first, again = receiver.received
    assert again["signed"] and again["body"]["event"] == "approval.requested"
    assert again["body"]["approval_id"] == str(approval.id) == first["body"]["approval_id"]
    assert NoticeRetry.objects.get(pk=retry.pk).state == "sent"


def test_a_partial_approval_is_posted_to_the_webhook_with_who_approved(
        two_of_secops, receiver, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval_id=approval.id, user=_user("approver"), approve=True, via="session")
    recorded = receiver.received[-1]["body"]
    assert recorded["event"] == "approval.recorded" and recorded["approved_by"] == "approver"
    assert (recorded["approvals"], recorded["quorum"], recorded["status"]) == (1, 2, "pending")
    assert not NoticeRetry.objects.exists()


def test_the_workbench_lists_retries_for_governance_admins_and_compliance(demo, settings,
                                                                          django_capture_on_commit_callbacks):
    _mail_down(settings)
    _parked(django_capture_on_commit_callbacks)
    for name, status in (("admin", 200), ("compliance", 200), ("approver", 403)):
        browser = Client()
        browser.force_login(_user(name))
        page = browser.get("/admin/runs/noticeretry/")
        assert page.status_code == status, name
        if status == 200:
            assert "ConnectionRefusedError" in page.content.decode()
    assert notify.FAILURES["mail"] >= 1
