"""The workbench shows triggers with their last run and success rate and lets a governance admin
pause one; the API manages triggers (secret shown once, rotated, fires listed)."""

import pytest
from django.contrib.auth import get_user_model

from tests.triggers.helpers import deliver, schedule, service_account, webhook
from triggers.models import ServiceAccount, Trigger

pytestmark = pytest.mark.django_db(transaction=True)

LIST = {"ticket": {"title": "List all accounts."}}


def test_the_changelist_shows_last_run_and_success_rate_and_a_governance_admin_pauses(demo, governance_admin):
    trigger, secret = webhook()
    for n in range(3):
        assert deliver("helpdesk", secret, {"ticket": {"title": "List all accounts.", "n": n}},
                       delivery=f"e{n}").status_code == 202
    page = governance_admin.browser.get("/admin/triggers/trigger/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "helpdesk" in text and "100% of 3" in text and "succeeded" in text
    detail = governance_admin.browser.get(f"/admin/triggers/trigger/{trigger.pk}/change/").content.decode()
    assert "recent fires" in detail.lower() and "e2" in detail and secret not in detail
    response = governance_admin.browser.post("/admin/triggers/trigger/", {
        "action": "pause", "_selected_action": [trigger.pk]})
    assert response.status_code == 302
    trigger.refresh_from_db()
    assert not trigger.enabled and trigger.paused_by == governance_admin.user


def test_compliance_reads_triggers_in_the_workbench_but_cannot_pause(demo, compliance_officer):
    trigger, _ = webhook()
    assert compliance_officer.browser.get("/admin/triggers/trigger/").status_code == 200
    compliance_officer.browser.post("/admin/triggers/trigger/", {"action": "pause", "_selected_action": [trigger.pk]})
    trigger.refresh_from_db()
    assert trigger.enabled


def test_an_operator_does_not_see_triggers_in_the_workbench(demo, caller):
    webhook()
    caller.user.is_staff = True
    caller.user.save()
    assert caller.browser.get("/admin/triggers/trigger/").status_code == 403


def test_a_service_account_is_made_in_the_workbench_without_a_password(demo, governance_admin):
    from django.contrib.auth.models import Group

    response = governance_admin.browser.post("/admin/triggers/serviceaccount/add/", {
        "username": "monitor-bot", "roles": [Group.objects.get(name="operators").pk], "description": "alerts"})
    assert response.status_code == 302, response.content[:2000]
    account = ServiceAccount.objects.get(user__username="monitor-bot")
    assert not account.user.has_usable_password() and list(account.user.groups.values_list("name", flat=True)) == [
        "operators"]


def test_the_api_creates_a_webhook_trigger_and_shows_its_secret_once(demo, admin, operator):
    service_account()
    created = admin.post("/api/v1/triggers/", {
        "name": "alerts", "kind": "webhook", "agent": "crm-assistant", "service_account": "helpdesk-bot",
        "input_template": "{{ payload.ticket.title }}", "concurrency": "queue"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["secret"]
    assert secret.startswith("whsec_") and body["hook_url"] == "/api/v1/hooks/alerts/"
    read = admin.get("/api/v1/triggers/alerts/").json()
    assert "secret" not in read and secret not in str(read) and secret not in Trigger.objects.get().secret_encrypted
    assert deliver("alerts", secret, LIST, delivery="x1").status_code == 202
    fires = operator.get("/api/v1/triggers/alerts/fires/").json()["results"]
    assert [f["outcome"] for f in fires] == ["started"] and fires[0]["run_status"] == "succeeded"
    assert operator.get("/api/v1/triggers/alerts/").json()["stats"]["success_rate"] == 1.0
    rotated = admin.post("/api/v1/triggers/alerts/rotate-secret/").json()["secret"]
    again = {"ticket": {"title": "List all accounts.", "id": 2}}
    assert deliver("alerts", secret, again, delivery="x2").status_code == 401
    assert deliver("alerts", rotated, again, delivery="x3").status_code == 202
    assert operator.post("/api/v1/triggers/alerts/pause/").status_code == 403


@pytest.mark.parametrize("body, field", [
    ({"kind": "schedule", "cron": "bad"}, "schedule"),
    ({"kind": "webhook", "input_template": "{{ payload.x "}, "input_template"),
    ({"kind": "webhook", "service_account": "operator"}, "service_account"),
    ({"kind": "webhook", "payload_schema": {"type": "nope"}}, "payload_schema"),
])
def test_the_api_refuses_a_trigger_that_cannot_be_kept(demo, admin, body, field):
    service_account()
    base = {"name": "t", "agent": "crm-assistant", "service_account": "helpdesk-bot", "input_template": "Hi"}
    answer = admin.post("/api/v1/triggers/", base | body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["details"]


def test_patch_changes_a_schedule_and_its_periodic_task(demo, admin):
    schedule("morning", cron="0 7 * * *")
    answer = admin.patch("/api/v1/triggers/morning/", {"cron": "30 6 * * 1-5", "timezone": "Europe/Berlin"},
                         format="json")
    assert answer.status_code == 200, answer.content
    trigger = Trigger.objects.get(name="morning")
    assert trigger.periodic_task.crontab.minute == "30" and str(trigger.periodic_task.crontab.timezone) == "Europe/Berlin"


def test_a_service_account_user_is_a_user_like_any_other(demo):
    account = service_account()
    assert get_user_model().objects.filter(username="helpdesk-bot", is_active=True).exists()
    assert account.user.service_account == account


def test_the_service_account_command_makes_one_and_refuses_unknown_roles(demo):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("service_account", "cli-bot", "--role", "operators", "--description", "cli", stdout=out)
    assert out.getvalue().strip() == "service account cli-bot (operators)"
    assert not ServiceAccount.objects.get(user__username="cli-bot").user.has_usable_password()
    with pytest.raises(CommandError, match="unknown roles: nope"):
        call_command("service_account", "cli-bot-2", "--role", "nope")
    with pytest.raises(CommandError, match="exists already"):
        call_command("service_account", "cli-bot", "--role", "operators")


def test_the_fire_history_is_read_in_the_workbench_and_never_written(demo, governance_admin, compliance_officer):
    trigger, secret = webhook()
    assert deliver("helpdesk", secret, LIST, delivery="h1").status_code == 202
    for person in (governance_admin, compliance_officer):
        assert person.browser.get("/admin/triggers/triggerfire/").status_code == 200
        assert person.browser.get("/admin/triggers/triggerfire/add/").status_code == 403
    fire = trigger.fires.get()
    assert governance_admin.browser.post(f"/admin/triggers/triggerfire/{fire.pk}/delete/", {"post": "yes"}).status_code == 403
    assert trigger.fires.count() == 1


def test_a_trigger_and_a_service_account_are_paused_or_disabled_in_the_workbench_never_deleted(demo, governance_admin):
    # Deleting the trigger would take its fires with it (a cascade): the record of what came in.
    trigger, secret = webhook()
    assert deliver("helpdesk", secret, LIST, delivery="h1").status_code == 202
    account = trigger.service_account
    for url in (f"/admin/triggers/trigger/{trigger.pk}/delete/", f"/admin/triggers/serviceaccount/{account.pk}/delete/"):
        assert governance_admin.browser.post(url, {"post": "yes"}).status_code == 403
    for model, pk in (("trigger", trigger.pk), ("serviceaccount", account.pk)):
        page = governance_admin.browser.get(f"/admin/triggers/{model}/")
        assert page.status_code == 200 and b"delete_selected" not in page.content
        bulk = governance_admin.browser.post(f"/admin/triggers/{model}/", {"action": "delete_selected",
                                                                           "_selected_action": [pk], "post": "yes"})
        assert bulk.status_code in (200, 302)
    assert Trigger.objects.filter(pk=trigger.pk).exists() and trigger.fires.count() == 1
    assert ServiceAccount.objects.filter(pk=account.pk).exists()
