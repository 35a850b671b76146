"""Authentication edges the matrix relies on: the anonymous 401, session writes and CSRF, a deactivated
user's token; and the health endpoints outside it, which need no credentials."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from runs.models import Run
from tests.api.role_matrix import API, BODIES
from tests.api.role_matrix_world import token_client, user_named

pytestmark = pytest.mark.django_db


def test_anonymous_gets_401_with_our_error_body_and_a_token_challenge(demo):
    response = APIClient().get(API + "runs/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Token'
    assert response.json() == {"error": {"code": "not_authenticated",
                                         "message": "Authentication credentials were not provided.", "details": {}}}
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    response = bad.get(API + "runs/")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


def test_health_endpoints_answer_anyone(demo):
    # Outside /api/v1/ and outside the matrix: liveness and readiness, no credentials at all.
    for path in ("/healthz", "/readyz"):
        assert APIClient().get(path).status_code == 200


def test_session_auth_writes_need_the_csrf_token(demo):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user_named("operator"))
    assert client.get(API + "runs/").status_code == 200
    response = client.post(API + "runs/", BODIES[("POST", "runs/")], format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]["message"]
    assert not Run.objects.exists()


def test_a_deactivated_users_token_is_refused(demo):
    client = token_client("operator")
    get_user_model().objects.filter(username="operator").update(is_active=False)
    response = client.get(API + "runs/")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"
