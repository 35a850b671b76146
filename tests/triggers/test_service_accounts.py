"""A service account acts only through its triggers: no command, API, form or shell gives it a token,
a password or a session (triggers.guards). Governance admins list, make, disable and enable service
accounts over the API, as the workbench's page does; a disabled account's triggers start nothing."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.test import Client

from governance.models import ApiToken
from governance.tokens import token_issue
from runs.models import Run
from tests.triggers.helpers import deliver, service_account, webhook
from triggers.models import ServiceAccount

pytestmark = pytest.mark.django_db(transaction=True)

LIST = {"ticket": {"title": "List all accounts."}}


def test_issue_token_refuses_a_service_account_and_still_serves_a_person(demo):
    service_account("helpdesk-bot")
    with pytest.raises(CommandError, match="'helpdesk-bot' is a service account"):
        call_command("issue_token", "helpdesk-bot", stdout=StringIO())
    assert not ApiToken.objects.filter(user__username="helpdesk-bot").exists()
    out = StringIO()
    call_command("issue_token", "operator", stdout=out)
    assert out.getvalue().startswith("wt_")


def test_no_caller_of_token_issue_mints_a_token_for_one(demo):
    account = service_account("helpdesk-bot")
    with pytest.raises(PermissionDenied, match="acts only through its triggers"):
        token_issue(user=account.user, via=ApiToken.Issued.COMMAND, issued_by="shell")
    assert not ApiToken.objects.filter(user=account.user).exists()


def test_no_password_is_set_on_one_by_changepassword_or_a_shell(demo, monkeypatch):
    account = service_account("helpdesk-bot")
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "a-long-enough-Passw0rd")
    with pytest.raises(PermissionDenied):
        call_command("changepassword", "helpdesk-bot", stdout=StringIO())
    user = get_user_model().objects.get(pk=account.user.pk)
    user.set_password("another-long-Passw0rd")
    with pytest.raises(PermissionDenied):
        user.save()
    assert not get_user_model().objects.get(pk=account.user.pk).has_usable_password()
    # Saves that do not write the password (a login's last_login, disabling) are not refused.
    user.refresh_from_db()
    user.first_name = "Bot"
    user.save()


def test_no_session_is_opened_for_one(demo):
    account = service_account("helpdesk-bot")
    browser = Client()
    with pytest.raises(PermissionDenied):
        browser.force_login(account.user)
    assert browser.get("/admin/").status_code == 302  # still signed out: the sign-in page
    assert browser.post("/admin/login/", {"username": "helpdesk-bot", "password": ""}).status_code == 200


def test_governance_admins_list_make_disable_and_enable_service_accounts(demo, admin, operator, compliance):
    trigger, secret = webhook("helpdesk")
    made = admin.post("/api/v1/service-accounts/", {"username": "monitor-bot", "roles": ["operators"],
                                                   "description": "alerts"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json() | {"created_at": None} == {
        "username": "monitor-bot", "description": "alerts", "active": True, "roles": ["operators"], "triggers": [],
        "created_by": "admin", "created_at": None, "disabled_by": None, "disabled_at": None}
    user = ServiceAccount.objects.get(user__username="monitor-bot").user
    assert not user.has_usable_password() and not user.is_staff
    listed = admin.get("/api/v1/service-accounts/").json()["results"]
    assert [(a["username"], a["triggers"]) for a in listed] == [("helpdesk-bot", ["helpdesk"]), ("monitor-bot", [])]
    for client in (operator, compliance):
        assert client.get("/api/v1/service-accounts/").status_code == 403

    disabled = admin.post("/api/v1/service-accounts/helpdesk-bot/disable/")
    assert disabled.status_code == 200 and disabled.json()["active"] is False
    assert disabled.json()["disabled_by"] == "admin" and disabled.json()["disabled_at"]
    refused = deliver("helpdesk", secret, LIST, delivery="while-disabled")
    assert refused.status_code == 422 and "disabled" in refused.json()["error"]["message"]
    assert not Run.objects.exists()

    enabled = admin.post("/api/v1/service-accounts/helpdesk-bot/enable/").json()
    assert enabled["active"] is True and enabled["disabled_at"] is None
    again = {"ticket": {"title": "List all accounts.", "id": 2}}  # not the refused message again (a replay)
    assert deliver("helpdesk", secret, again, delivery="enabled-again").status_code == 202
    assert Run.objects.get().caller.username == "helpdesk-bot"


@pytest.mark.parametrize("body, status", [
    ({"username": "helpdesk-bot"}, 409),
    ({"username": "x-bot", "roles": ["nope"]}, 400),
    ({"username": "x bot"}, 400),
    ({"username": "x-bot", "password": "sneaky"}, 400),
])
def test_the_api_refuses_what_it_cannot_make(demo, admin, body, status):
    service_account("helpdesk-bot")
    assert admin.post("/api/v1/service-accounts/", body, format="json").status_code == status
    assert admin.get("/api/v1/service-accounts/nobody/").status_code == 404


def test_an_unknown_role_is_named_in_the_field(demo, admin):
    refused = admin.post("/api/v1/service-accounts/", {"username": "x-bot", "roles": ["nope"]}, format="json")
    assert refused.json()["error"]["details"] == {"roles": ["no role named 'nope'"]}


def test_the_migration_closes_what_a_service_account_held_before(demo):
    """triggers 0003's data step: a token issued to a service account before the guard (here by
    bulk_create, which sends no pre_save) is revoked, and a password written past it made unusable."""
    from importlib import import_module

    from django.apps import apps
    from django.contrib.auth.hashers import make_password

    account = service_account("helpdesk-bot")
    token = token_issue(user=get_user_model().objects.get(username="operator"), via="command", issued_by="t")[0]
    ApiToken.objects.filter(pk=token.pk).update(user=account.user)
    get_user_model().objects.filter(pk=account.user.pk).update(password=make_password("set-past-the-guard"))
    import_module("triggers.migrations.0003_service_account_disabled").close_credentials(apps, None)
    token.refresh_from_db()
    assert token.revoked_at is not None and "service account" in token.revoked_by
    assert not get_user_model().objects.get(pk=account.user.pk).has_usable_password()


def test_the_workbench_disables_and_enables_a_service_account(demo, governance_admin):
    account = service_account("helpdesk-bot")
    page = "/admin/triggers/serviceaccount/"
    governance_admin.browser.post(page, {"action": "disable", "_selected_action": [account.pk]})
    account.refresh_from_db()
    assert not account.user.is_active and account.disabled_by == governance_admin.user
    governance_admin.browser.post(page, {"action": "enable", "_selected_action": [account.pk]})
    account.refresh_from_db()
    assert account.user.is_active and account.disabled_at is None
