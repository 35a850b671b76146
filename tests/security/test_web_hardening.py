"""The web side: production settings that refuse to start half-configured and pass
`check --deploy`, security headers, login lockout, CSRF on session-authenticated API calls."""

import base64
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
              "DJANGO_ALLOWED_HOSTS": "warrant.example.com,testserver", "WARRANT_MODEL_ALLOWED_HOSTS": "llm.internal",
              "WARRANT_TOOL_ALLOWED_HOSTS": "tools.internal", "WARRANT_CACHE_URL": "redis://127.0.0.1:6379/1",
              # A production signing key, given as the environment variable's base64 form.
              "WARRANT_RECEIPT_SIGNING_KEY": base64.b64encode(
                  Ed25519PrivateKey.generate().private_bytes_raw()).decode()}


def _python(code: str, env: dict, tmp_path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WARRANT_", "DATABASE_URL"))}
    clean.update({"DJANGO_SETTINGS_MODULE": "warrant.settings", "WARRANT_DATA_DIR": str(tmp_path)}, **env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("unset, warning", [
    ("WARRANT_MODEL_ALLOWED_HOSTS", "governance.W002"),  # model servers may be anywhere
    ("WARRANT_TOOL_ALLOWED_HOSTS", "governance.W003"),  # tool services may be anywhere
    ("WARRANT_CACHE_URL", "governance.W004"),  # each web process counts rate limits alone
    ("WARRANT_RECEIPT_SIGNING_KEY", "governance.E010"),  # no run could be sealed
])
def test_check_deploy_warns_about_each_production_setting_left_out(unset, warning, tmp_path):
    env = {k: v for k, v in PRODUCTION.items() if k != unset}
    done = _python("from django.core.management import execute_from_command_line; "
                   "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])",
                   env, tmp_path)
    assert done.returncode != 0 and warning in done.stdout + done.stderr


@pytest.mark.slow
def test_manage_py_check_deploy_is_clean_with_production_settings(tmp_path):
    done = _python("import sys; from django.core.management import execute_from_command_line; "
                   "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])",
                   PRODUCTION, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"])
def test_production_settings_refuse_to_start_without_a_secret_key_or_allowed_hosts(missing, tmp_path):
    env = {k: v for k, v in PRODUCTION.items() if k != missing}
    done = _python("import django; django.setup()", env, tmp_path)
    assert done.returncode != 0
    assert f"ImproperlyConfigured: {missing} is required when DJANGO_DEBUG is off" in done.stderr


HEADERS = """
import django, json
django.setup()
from django.test import Client
c = Client()
plain = c.get('/api/v1/schema/')
tls = c.get('/healthz', secure=True)
health = c.get('/healthz')
print(json.dumps({'plain': [plain.status_code, plain.get('Location')], 'health': health.status_code,
                  'headers': {k: tls.get(k) for k in ['Strict-Transport-Security', 'Content-Security-Policy',
                              'X-Frame-Options', 'X-Content-Type-Options', 'Referrer-Policy']},
                  'secure_cookies': [django.conf.settings.SESSION_COOKIE_SECURE, django.conf.settings.CSRF_COOKIE_SECURE]}))
"""


@pytest.mark.slow
def test_production_redirects_plain_http_and_sends_hsts_csp_and_framing_headers(tmp_path):
    import json

    done = _python(HEADERS, PRODUCTION, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["plain"] == [301, "https://testserver/api/v1/schema/"]
    assert seen["health"] == 200, "load balancers probe health over plain HTTP"
    headers = seen["headers"]
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert (headers["X-Frame-Options"], headers["X-Content-Type-Options"]) == ("DENY", "nosniff")
    assert headers["Referrer-Policy"] == "same-origin"
    assert seen["secure_cookies"] == [True, True]


def _login(client: Client, username: str, password: str, address: str = "10.9.9.9"):
    return client.post("/admin/login/?next=/admin/", {"username": username, "password": password},
                       REMOTE_ADDR=address)


def test_repeated_failed_logins_lock_out_that_username_from_that_address(demo):
    client = Client()
    for _ in range(4):
        assert _login(client, "approver", "wrong").status_code == 200  # the form again, with an error
    assert _login(client, "approver", "wrong").status_code == 429  # the fifth failure locks
    locked = _login(client, "approver", "warrant-demo")
    assert locked.status_code == 429, "the right password does not help once locked out"
    assert "_auth_user_id" not in client.session
    other_address = _login(Client(), "approver", "warrant-demo", address="10.8.8.8")
    assert other_address.status_code == 302, "another address is not locked out"
    other_user = _login(Client(), "admin", "warrant-demo")
    assert other_user.status_code == 302, "nor is another user from the same address"


def test_a_successful_login_resets_the_failure_count(demo):
    client = Client()
    for _ in range(4):
        _login(client, "admin", "wrong")
    assert _login(client, "admin", "warrant-demo").status_code == 302
    for _ in range(4):
        _login(Client(), "admin", "wrong")
    assert _login(Client(), "admin", "warrant-demo").status_code == 302


def test_session_authenticated_api_writes_need_the_csrf_token(demo):
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="operator"))
    body = {"agent": "crm-assistant", "input": "List all accounts."}
    refused = client.post("/api/v1/runs/", body, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]
    client.get("/admin/login/")  # any page with a form sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post("/api/v1/runs/", body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201, accepted.content


def test_token_authenticated_api_calls_need_no_csrf_token(demo):
    from governance.tokens import token_issue

    key = token_issue(user=get_user_model().objects.get(username="operator"), via="command", issued_by="test")[1]
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 201


def test_every_page_carries_the_content_security_policy_and_the_api_viewer_has_no_inline_script(demo):
    client = Client()
    assert "default-src 'self'" in client.get("/admin/login/")["Content-Security-Policy"]
    client.force_login(get_user_model().objects.get(username="operator"))
    page = client.get("/api/v1/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<script>" not in html and "<script src=" in html
    assert client.get("/api/v1/docs/?script").status_code == 200
