"""A DBA who reads django_session cannot sign in as the people whose sessions it holds: the rows
keep a digest of the cookie, not the cookie (as API tokens do)."""

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from tests import factories

pytestmark = pytest.mark.django_db


def test_a_session_row_read_from_the_database_does_not_sign_in(secops):
    approver = Client()
    approver.force_login(secops.user)
    cookie = approver.cookies["sessionid"].value
    assert approver.get("/api/v1/approvals/").status_code == 200
    rows = list(Session.objects.values_list("session_key", flat=True))
    assert rows and cookie not in rows
    for row in rows:
        thief = Client()
        thief.cookies["sessionid"] = row
        assert thief.get("/api/v1/approvals/").status_code in (401, 403)


def test_signing_out_removes_the_row_and_a_new_login_replaces_it(db):
    client = Client()
    client.force_login(factories.approver())
    assert Session.objects.count() == 1
    client.force_login(factories.caller())  # a new key on login
    assert Session.objects.count() == 1
    client.logout()
    assert Session.objects.count() == 0


def test_a_signed_in_users_data_copied_to_a_row_for_a_chosen_key_does_not_sign_in(db):
    import datetime

    from django.utils import timezone

    from core.sessions import stored_key

    approver = Client()
    approver.force_login(factories.approver())
    data = Session.objects.get().session_data
    chosen = "dba-chosen-session-key-0123456789"
    Session.objects.create(session_key=stored_key(chosen), session_data=data,
                           expire_date=timezone.now() + datetime.timedelta(days=1))
    thief = Client()
    thief.cookies["sessionid"] = chosen
    assert thief.get("/api/v1/approvals/").status_code in (401, 403)
    assert approver.get("/api/v1/approvals/").status_code == 200
