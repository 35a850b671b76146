"""API tokens as an integrator uses them: Warrant reads the token, its user and the governance
stamp in one statement of its own (governance.access), so these check it answers as DRF's
TokenAuthentication does."""

import datetime

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from governance import stamp
from governance.access import StampedTokenAuthentication

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _token(username: str) -> str:
    return Token.objects.get_or_create(user=get_user_model().objects.get(username=username))[0].key


def test_a_token_acts_as_its_user(demo):
    started = _client(_token("operator")).post("/api/v1/runs/", {"agent": "crm-assistant", "input": "How is Acme?"})
    assert started.status_code == 201 and started.json()["caller"] == "operator"
    # Another user's token is another user: the approver may not start runs.
    assert _client(_token("approver")).post("/api/v1/runs/", {"agent": "crm-assistant", "input": "x"}).status_code == 403


def test_an_unknown_token_is_refused_with_drfs_answer(demo):
    answer = _client("0" * 40).get("/api/v1/runs/")
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Token"
    assert "Invalid token." in answer.content.decode()


def test_a_deactivated_users_token_stops_working_at_once(demo):
    key = _token("operator")
    assert _client(key).get("/api/v1/runs/").status_code == 200
    get_user_model().objects.filter(username="operator").update(is_active=False)
    answer = _client(key).get("/api/v1/runs/")
    assert answer.status_code == 401 and "User inactive or deleted." in answer.content.decode()


def test_the_user_comes_whole_and_typed_with_the_stamp(demo):
    user, token = StampedTokenAuthentication().authenticate_credentials(_token("approver"))
    stored = get_user_model().objects.get(username="approver")
    assert (user.pk, user.username, user.is_active, user.is_superuser) == (stored.pk, "approver", True, False)
    # Columns come through the database's converters, as a model query would give them.
    assert isinstance(user.date_joined, datetime.datetime) and user.date_joined == stored.date_joined
    assert list(user.groups.values_list("name", flat=True)) == list(stored.groups.values_list("name", flat=True))
    stored_token = Token.objects.get(user=stored)
    assert token.user is user and token.key == stored_token.key
    # The token as a model query gives it: its time aware (SQLite keeps it as text), and stored.
    assert token.created == stored_token.created and token.created.tzinfo is not None
    assert not token._state.adding
    assert token.governance_stamp == stamp.current()
