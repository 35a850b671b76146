"""API tokens as an integrator uses them: `Authorization: Token <key>`, the key stored only as
its digest, shown once, expiring and revocable; read with its user and the governance stamp in
one statement (governance.auth)."""

import datetime
import hashlib
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from core import stamp
from governance.auth import ApiTokenAuthentication
from governance.models import ApiToken
from governance.tokens import token_issue, token_seal

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
KEY = re.compile(r"wt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _issue(username: str, **kwargs) -> tuple[ApiToken, str]:
    return token_issue(user=get_user_model().objects.get(username=username), via="command", issued_by="test", **kwargs)


def _signed_in(username: str) -> APIClient:
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(get_user_model().objects.get(username=username))
    return client


def test_a_token_acts_as_its_user(demo):
    started = _client(_issue("operator")[1]).post("/api/v1/runs/", {"agent": "crm-assistant", "input": "How is Acme?"})
    assert started.status_code == 201 and started.json()["caller"] == "operator"
    # Another user's token is another user: the approver may not start runs.
    assert _client(_issue("approver")[1]).post("/api/v1/runs/", {"agent": "crm-assistant", "input": "x"}).status_code == 403


def test_an_unknown_token_is_refused_with_drfs_answer(demo):
    answer = _client("0" * 40).get("/api/v1/runs/")
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Token"
    assert "Invalid token." in answer.content.decode()


def test_only_the_digest_is_stored(demo):
    token, key = _issue("operator")
    assert KEY.fullmatch(key) and key.startswith(f"wt_{token.public_id}_")
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert row["digest"] == hashlib.sha256(key.encode()).hexdigest()
    secret = key.split("_", 2)[2]
    assert not any(secret in str(value) for value in row.values())


def test_an_expired_token_is_refused(demo):
    token, key = _issue("operator", ttl_days=1)
    assert _client(key).get("/api/v1/runs/").status_code == 200
    # Its day has passed (as the server would have issued it: sealed with that expiry).
    past = timezone.now() - datetime.timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=past, seal=token_seal(
        public_id=token.public_id, digest=token.digest, user_id=token.user_id, expires_at=past))
    answer = _client(key).get("/api/v1/runs/")
    assert answer.status_code == 401 and "Token expired." in answer.content.decode()


def test_tokens_expire_after_the_configured_days(demo, settings):
    settings.WARRANT = {**settings.WARRANT, "TOKEN_TTL_DAYS": 7}
    token, _ = _issue("operator")
    assert abs(token.expires_at - (timezone.now() + datetime.timedelta(days=7))) < datetime.timedelta(minutes=1)


def test_a_revoked_token_is_refused_at_once(demo):
    token, key = _issue("operator")
    owner = _client(key)
    assert owner.get("/api/v1/runs/").status_code == 200
    assert owner.delete(f"/api/v1/tokens/{token.public_id}/").status_code == 204
    answer = _client(key).get("/api/v1/runs/")
    assert answer.status_code == 401 and "Token revoked." in answer.content.decode()
    # Revoked, not deleted: the id a decision names stays traceable.
    assert ApiToken.objects.get(pk=token.pk).revoked_by == "operator"


def test_a_deactivated_users_token_stops_working_at_once(demo):
    key = _issue("operator")[1]
    assert _client(key).get("/api/v1/runs/").status_code == 200
    get_user_model().objects.filter(username="operator").update(is_active=False)
    answer = _client(key).get("/api/v1/runs/")
    assert answer.status_code == 401 and "User inactive or deleted." in answer.content.decode()


def test_a_signed_in_user_issues_a_token_whose_key_is_shown_once(demo):
    session = _signed_in("operator")
    issued = session.post("/api/v1/tokens/", {"name": "ci", "expires_in_days": 30}, format="json")
    assert issued.status_code == 201, issued.content
    body = issued.json()
    key, public_id = body["key"], body["public_id"]
    assert KEY.fullmatch(key) and body["issued_via"] == "api" and body["state"] == "active"
    assert _client(key).get("/api/v1/runs/").status_code == 200
    # Never again: not in the list, not in the token's own page.
    listed = session.get("/api/v1/tokens/")
    detail = session.get(f"/api/v1/tokens/{public_id}/")
    assert listed.status_code == detail.status_code == 200
    for answer in (listed, detail):
        assert key not in answer.content.decode() and key.split("_", 2)[2] not in answer.content.decode()
    assert public_id in [t["public_id"] for t in listed.json()["results"]]


def test_a_token_cannot_issue_tokens(demo):
    answer = _client(_issue("operator")[1]).post("/api/v1/tokens/", {"name": "more"}, format="json")
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"


def test_issuing_is_strict(demo):
    session = _signed_in("operator")
    # No way to name another user, and no day count outside 1..3650.
    for body in ({"user": "approver"}, {"expires_in_days": 0}, {"expires_in_days": "30"}, {"name": 5}):
        answer = session.post("/api/v1/tokens/", body, format="json")
        assert answer.status_code == 400, (body, answer.content)
    assert not ApiToken.objects.filter(user__username="approver").exists()


def test_last_use_is_written_once_per_interval_not_per_request(demo):
    token, key = _issue("operator")
    client = _client(key)
    assert client.get("/api/v1/tokens/").status_code == 200
    first_use = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first_use is not None
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/tokens/").status_code == 200
    assert not any(q["sql"].startswith("UPDATE") and "governance_apitoken" in q["sql"] for q in queries)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first_use


def test_the_user_comes_whole_and_typed_with_the_stamp(demo):
    stored_token, key = _issue("approver")
    user, token = ApiTokenAuthentication().authenticate_credentials(key)
    stored = get_user_model().objects.get(username="approver")
    assert (user.pk, user.username, user.is_active, user.is_superuser) == (stored.pk, "approver", True, False)
    # Columns come through the database's converters, as a model query would give them.
    assert isinstance(user.date_joined, datetime.datetime) and user.date_joined == stored.date_joined
    assert list(user.groups.values_list("name", flat=True)) == list(stored.groups.values_list("name", flat=True))
    assert token.user is user and token.public_id == stored_token.public_id
    assert token.created_at == stored_token.created_at and token.created_at.tzinfo is not None
    assert token.expires_at == stored_token.expires_at
    assert not token._state.adding
    assert token.governance_stamp == stamp.current()


# --- `make -s token USER=...`, the README's way to get a key -------------------------------------


def _make_token(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "WARRANT_DATA_DIR": str(tmp_path), "HOME": str(tmp_path), "USER": "operator"}
    # -o: the venv counts as installed (no pip run from a test).
    return subprocess.run(["make", "-s", "-o", ".venv/.installed", "token", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def token_db(tmp_path_factory):
    """A database of its own for the make target (it runs manage.py on the embedded default)."""
    data = tmp_path_factory.mktemp("make-token")
    env = {"PATH": "/usr/bin:/bin", "WARRANT_DATA_DIR": str(data), "DJANGO_DEBUG": "1", "HOME": str(data)}
    python = str(ROOT / ".venv/bin/python")
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    subprocess.run([python, "manage.py", "shell", "-c",
                    "from django.contrib.auth.models import User; User.objects.create_user('tour')"],
                   cwd=ROOT, env=env, check=True, timeout=120, capture_output=True)
    return data


@pytest.mark.slow
def test_make_token_prints_a_new_key_and_nothing_else(token_db):
    first, second = _make_token(token_db, "USER=tour"), _make_token(token_db, "USER=tour")
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    assert KEY.fullmatch(first.stdout.strip()) and KEY.fullmatch(second.stdout.strip())
    assert first.stdout != second.stdout  # a new token each time: an old key cannot be shown again
    with sqlite3.connect(token_db / "warrant.sqlite3") as db:
        marks = db.execute("SELECT DISTINCT issued_via FROM governance_apitoken").fetchall()
    assert marks == [("command",)]  # the admin shows how the key came to exist


@pytest.mark.slow
@pytest.mark.parametrize("args, says", [
    (("USER=nobody",), "no user named 'nobody'"),
    (("USER=",), "name the user"),
    ((), "name the user"),  # the environment's USER (here "operator") is the login name, not taken
])
def test_make_token_fails_clearly_without_a_known_user(token_db, args, says):
    answer = _make_token(token_db, *args)
    assert answer.returncode != 0 and answer.stdout == ""
    assert says in answer.stderr


def test_check_deploy_warns_while_tokens_never_expire(settings):
    from django.core import checks

    settings.WARRANT = {**settings.WARRANT, "TOKEN_TTL_DAYS": 0}
    assert "governance.W020" in [m.id for m in checks.run_checks(include_deployment_checks=True)]
    settings.WARRANT = {**settings.WARRANT, "TOKEN_TTL_DAYS": 90}
    assert "governance.W020" not in [m.id for m in checks.run_checks(include_deployment_checks=True)]
