"""Notifications of approval requests (runs.notify): who is told, what they are told, and that the
link in a message opens the request for its recipient and for no one else."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from runs import notify, services
from runs.models import ApprovalRequest, Run
from tests import factories

pytestmark = pytest.mark.django_db

PUBLIC = "https://warrant.example.test"


@pytest.fixture(autouse=True)
def _public_url(settings):
    settings.WARRANT_PUBLIC_URL = PUBLIC
    settings.WARRANT_NOTIFY_WEBHOOK_URL = ""


def _user(name):
    return get_user_model().objects.get(username=name)


def _parked(capture) -> ApprovalRequest:
    """The demo's deletion, parked for secops, its notices sent (the park committed)."""
    with capture(execute=True):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                    caller=_user("operator"))
        services.run_advance(run_id=run.id)
    return ApprovalRequest.objects.get(run=run)


def _link(body: str, label: str) -> str:
    """The path of the link the message gives after `label`, checked to be absolute under PUBLIC."""
    url = re.search(rf"{label}: (\S+)", body).group(1)
    assert url.startswith(PUBLIC + "/"), url
    return url[len(PUBLIC):]


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _no_arguments(message, approval):
    text = message.subject + message.body
    for value in approval.arguments.values():
        assert str(value) not in text, f"the argument {value!r} is in the message"


def test_a_parked_call_mails_its_approvers_a_link_that_opens_the_request_for_them_only(
        demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    assert approval.arguments  # there is something not to leak
    [message] = mail.outbox
    assert message.to == ["approver@example.com"]
    assert message.subject == f"[Warrant] Approval needed: the tool call delete_account for run {str(approval.run_id)[:8]}"
    assert str(approval.id) in message.body and str(approval.run_id) in message.body
    assert "crm-assistant" in message.body and "secops" in message.body
    _no_arguments(message, approval)

    path = _link(message.body, "The request in the workbench")
    page = _browser(_user("approver")).get(path)
    assert page.status_code == 200 and "delete_account" in page.content.decode()
    assert str(approval.id) in page.content.decode() or approval.arguments_sha256 in page.content.decode()
    # The run's caller (not staff) and a staff member of another role do not get the page.
    assert _browser(_user("operator")).get(path).status_code == 302
    stranger = factories.user(roles=("helpdesk",), staff=True)
    other = _browser(stranger).get(path)
    assert other.status_code != 200
    assert approval.arguments_sha256 not in _browser(stranger).get(path, follow=True).content.decode()


def test_the_caller_and_those_the_rule_excludes_are_not_told(demo, django_capture_on_commit_callbacks):
    secops = Group.objects.get(name="secops")
    _user("operator").groups.add(secops)  # the caller in the approver role: never asked to approve their own run
    no_address = factories.user(roles=("secops",), staff=True)
    inactive = factories.user(roles=("secops",), staff=True)
    get_user_model().objects.filter(pk=inactive.pk).update(email="gone@example.com", is_active=False)
    second = factories.user(roles=("secops",), staff=True)
    get_user_model().objects.filter(pk=second.pk).update(email="second@example.com")
    _parked(django_capture_on_commit_callbacks)
    assert sorted(m.to[0] for m in mail.outbox) == ["approver@example.com", "second@example.com"]
    assert no_address.email == ""


def test_a_decision_mails_the_caller_with_links_they_can_open(demo, approver, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = approver.post(f"/api/v1/approvals/{approval.id}/deny/", {"reason": "not this quarter"},
                                 format="json")
    assert response.status_code == 200, response.content
    [message] = mail.outbox
    assert message.to == ["operator@example.com"]
    assert message.subject.startswith("[Warrant] Denied: the tool call delete_account for your run")
    assert "by approver" in message.body and "Reason: not this quarter" in message.body
    _no_arguments(message, approval)

    api_path = _link(message.body, "In the API")
    caller_api = APIClient()
    caller_api.force_authenticate(_user("operator"))
    assert caller_api.get(api_path).status_code == 200
    stranger_api = APIClient()
    stranger_api.force_authenticate(factories.caller())
    assert stranger_api.get(api_path).status_code == 404

    run_path = _link(message.body, "The run in the workbench")
    get_user_model().objects.filter(username="operator").update(is_staff=True)  # a caller who works there
    assert _browser(_user("operator")).get(run_path).status_code == 200
    assert _browser(factories.user(roles=("helpdesk",), staff=True)).get(run_path).status_code != 200


def test_expiry_tells_the_caller(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    ApprovalRequest.objects.filter(id=approval.id).update(expires_at=approval.created_at)
    with django_capture_on_commit_callbacks(execute=True):
        services.run_reconcile()
    [message] = mail.outbox
    assert message.to == ["operator@example.com"] and message.subject.startswith("[Warrant] Expired:")


def test_approvers_are_reminded_once_when_the_request_is_about_to_expire(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    # The demo's TTL is 72 h: the lead is 10% of it, at most an hour.
    assert notify.remind_expiring(now=approval.expires_at - timedelta(hours=2)) == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert notify.remind_expiring(now=approval.expires_at - timedelta(minutes=30)) == 1
        assert notify.remind_expiring(now=approval.expires_at - timedelta(minutes=20)) == 0
    [message] = mail.outbox
    assert message.to == ["approver@example.com"] and message.subject.startswith("[Warrant] Expires soon:")
    _no_arguments(message, approval)
    assert _browser(_user("approver")).get(_link(message.body, "The request in the workbench")).status_code == 200
    assert ApprovalRequest.objects.get(id=approval.id).reminded_at == approval.expires_at - timedelta(minutes=30)


def test_the_reconciler_reminds_on_its_tick(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    from django.utils import timezone

    now = timezone.now()
    ApprovalRequest.objects.filter(id=approval.id).update(created_at=now - timedelta(hours=72),
                                                         expires_at=now + timedelta(minutes=10))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.run_reconcile()["reminded_approvals"] == 1
        assert services.run_reconcile()["reminded_approvals"] == 0
    assert [m.subject.split(":")[0] for m in mail.outbox] == ["[Warrant] Expires soon"]


def test_a_short_lived_request_is_reminded_within_a_tenth_of_its_life(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    start = approval.created_at
    ApprovalRequest.objects.filter(id=approval.id).update(expires_at=start + timedelta(minutes=10))
    assert notify.remind_expiring(now=start + timedelta(minutes=8)) == 0
    assert notify.remind_expiring(now=start + timedelta(minutes=9, seconds=1)) == 1


def test_an_escalated_request_mails_the_role_it_moved_to(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    lead = factories.user(roles=("secops-leads",), staff=True)
    get_user_model().objects.filter(pk=lead.pk).update(email="lead@example.com")
    secops, leads = Group.objects.get(name="secops"), Group.objects.get(name="secops-leads")
    ApprovalRequest.objects.filter(id=approval.id).update(approver_role=leads, escalated_from_role=secops)
    approval.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        notify.approval_escalated(approval)
    [message] = mail.outbox
    assert message.to == ["lead@example.com"]
    assert message.subject.startswith("[Warrant] Escalated to secops-leads:")
    assert "No one in secops decided in time" in message.body
    assert _browser(_user(lead.username)).get(_link(message.body, "The request in the workbench")).status_code == 200
    # Someone in neither role does not open it.
    stranger = factories.user(roles=("helpdesk",), staff=True)
    assert _browser(stranger).get(_link(message.body, "The request in the workbench")).status_code != 200


def test_a_request_decided_before_its_notice_went_out_is_not_announced(demo, approver,
                                                                      django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notify.approval_raised(approval)
    approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    mail.outbox.clear()
    for callback in callbacks:
        callback()
    assert mail.outbox == []


def test_a_mail_server_that_is_down_breaks_neither_the_park_nor_the_decision(
        demo, approver, settings, caplog, django_capture_on_commit_callbacks):
    # A real SMTP client against a port in this suite's block where nothing listens.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 8129
    before = notify.FAILURES["mail"]
    approval = _parked(django_capture_on_commit_callbacks)
    assert Run.objects.get(id=approval.run_id).status == "awaiting_approval"
    assert notify.FAILURES["mail"] == before + 1
    with django_capture_on_commit_callbacks(execute=True):
        response = approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json")
    assert response.status_code == 200
    assert ApprovalRequest.objects.get(id=approval.id).status == "approved"
    assert notify.FAILURES["mail"] == before + 2
    failures = [r for r in caplog.records if r.name == "runs.notify"]
    assert [r.levelname for r in failures] == ["WARNING", "WARNING"] and "ConnectionRefusedError" in failures[0].message


def test_a_budget_request_is_announced_without_its_figures(demo, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    # As runs.budget asks: kind budget, no tool, what was used and what is asked.
    ApprovalRequest.objects.filter(id=approval.id).update(
        kind="budget", tool="", arguments={"kind": "tokens", "asked": 4321},
        budget={"kind": "tokens", "used": 9876, "limit": 5000, "asked": 4321})
    approval.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        notify.approval_raised(approval)
    [message] = mail.outbox
    assert message.to == ["approver@example.com"]
    assert message.subject == f"[Warrant] Approval needed: a budget extension for run {str(approval.run_id)[:8]}"
    for figure in ("4321", "9876", "5000"):
        assert figure not in message.subject + message.body
    assert _browser(_user("approver")).get(_link(message.body, "The request in the workbench")).status_code == 200


def test_a_quorum_approval_names_every_approver_to_the_caller(demo, django_capture_on_commit_callbacks):
    from runs.models import ApprovalDecision

    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    second = factories.user("second-approver", roles=("secops",), staff=True)
    for person in (_user("approver"), second):
        ApprovalDecision.objects.create(approval=approval, user=person, username=person.get_username(), role="secops",
                                        decision="approved", via="session")
    ApprovalRequest.objects.filter(id=approval.id).update(quorum=2, approvals_count=2, status="approved",
                                                         decided_by=second)
    approval.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        notify.approval_decided(approval)
    [message] = mail.outbox
    assert "was approved by approver, second-approver." in message.body


def test_the_reconciler_escalating_a_request_mails_the_role_it_moved_to(demo, django_capture_on_commit_callbacks):
    from runs.approvals import approval_escalate_due

    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    lead = factories.user(roles=("secops-leads",), staff=True)
    get_user_model().objects.filter(pk=lead.pk).update(email="lead@example.com")
    due = approval.created_at + timedelta(hours=1)
    ApprovalRequest.objects.filter(id=approval.id).update(escalate_to_role=Group.objects.get(name="secops-leads"),
                                                         escalate_at=due)
    with django_capture_on_commit_callbacks(execute=True):
        assert approval_escalate_due(now=due - timedelta(seconds=1)) == 0
        assert approval_escalate_due(now=due) == 1
    [message] = mail.outbox
    assert message.to == ["lead@example.com"] and message.subject.startswith("[Warrant] Escalated to secops-leads:")
    assert "No one in secops decided in time" in message.body
    _no_arguments(message, approval)


def test_accounts_the_caller_set_up_are_not_told(demo, django_capture_on_commit_callbacks):
    """The rule a decision is checked against, applied to every member at once: an account the
    caller made, and one that account made, are not asked to approve the caller's run."""
    from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType

    people = ContentType.objects.get_for_model(get_user_model())
    puppet, puppets_puppet, regrouped, untouched = (factories.user(roles=("secops",), staff=True) for _ in range(4))
    for by, made, flag, said in ((_user("operator"), puppet, ADDITION, "[]"), (puppet, puppets_puppet, ADDITION, "[]"),
                                 (_user("operator"), regrouped, CHANGE, '[{"changed": {"fields": ["Groups"]}}]'),
                                 (_user("operator"), untouched, CHANGE, '[{"changed": {"fields": ["Email"]}}]')):
        get_user_model().objects.filter(pk=made.pk).update(email=f"{made.username}@example.com")
        LogEntry.objects.create(user=by, content_type=people, object_id=str(made.pk), object_repr=made.username,
                                action_flag=flag, change_message=said)
    _parked(django_capture_on_commit_callbacks)
    assert sorted(m.to[0] for m in mail.outbox) == ["approver@example.com", f"{untouched.username}@example.com"]


def test_a_waiting_notice_goes_to_the_role_the_request_is_with_when_it_is_sent(demo,
                                                                               django_capture_on_commit_callbacks):
    lead = factories.user(roles=("secops-leads",), staff=True)
    get_user_model().objects.filter(pk=lead.pk).update(email="lead@example.com")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                    caller=_user("operator"))
        services.run_advance(run_id=run.id)
    # It moved on before its park's notice went out: the notice reads it again.
    ApprovalRequest.objects.filter(run=run).update(approver_role=Group.objects.get(name="secops-leads"),
                                                   escalated_from_role=Group.objects.get(name="secops"))
    for callback in callbacks:
        callback()
    assert [m.to for m in mail.outbox] == [["lead@example.com"]]


def test_a_decision_is_told_from_what_the_decision_read(demo, django_capture_on_commit_callbacks,
                                                        django_assert_num_queries):
    from runs.approvals import approval_decide

    approval = _parked(django_capture_on_commit_callbacks)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=False):
        decided = approval_decide(approval_id=approval.id, user=_user("approver"), approve=False,
                                  reason="not this quarter", via="session")
    with django_capture_on_commit_callbacks(execute=False) as notice:
        notify.approval_decided(decided)
    with django_assert_num_queries(0):  # the request, its run, agent and caller came with the decision
        notice[0]()
    [message] = mail.outbox
    assert message.to == ["operator@example.com"] and "by approver" in message.body
    assert message.subject.startswith("[Warrant] Denied: the tool call delete_account for your run")
