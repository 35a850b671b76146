"""With DEBUG off, under gunicorn as docs/operations.md deploys it (collectstatic, then the web process
serves the files through whitenoise), the pages come up styled and the Swagger UI's scripts run."""

import base64
import os
import secrets
import sys

import pytest

from tests.browser.servers import free_port, manage, serving
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

pytestmark = pytest.mark.browser

UNSTYLED = "rgba(0, 0, 0, 0)"  # a header with no stylesheet has no background


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    """Base URL of gunicorn with DEBUG off, and an API token of a user who is not staff."""
    data = tmp_path_factory.mktemp("warrant-production")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WARRANT_", "DATABASE_URL", "CELERY_"))}
    env.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=secrets.token_urlsafe(64), DJANGO_ALLOWED_HOSTS="127.0.0.1",
               DJANGO_SECURE_SSL_REDIRECT="0", WARRANT_DATA_DIR=str(data), DJANGO_STATIC_ROOT=str(data / "static"),
               WARRANT_RECEIPT_SIGNING_KEY=base64.b64encode(Ed25519PrivateKey.generate().private_bytes_raw()).decode())
    for args in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        manage(env, *args)
    out = manage(env, "shell", "-c", (
        "from django.contrib.auth import get_user_model; from governance.tokens import token_issue; "
        "u = get_user_model().objects.create_user('reader', password='x' * 12); "
        "print('KEY', token_issue(user=u, via='command', issued_by='test')[1])"))
    key = next(line.split()[1] for line in out.splitlines() if line.startswith("KEY "))
    port = free_port()
    gunicorn = [sys.executable, "-m", "gunicorn", "warrant.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}"]
    with serving(gunicorn, env, port, data / "gunicorn.log") as base:
        yield {"url": base, "key": key}


def test_admin_login_landing_page_and_api_docs_are_styled_and_scripted_with_debug_off(browser, production,
                                                                                     screenshots):
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{production['url']}/admin/login/")
        assert page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor") != UNSTYLED
        page.screenshot(path=str(screenshots / "prod-admin-login.png"), full_page=True)

        page.goto(f"{production['url']}/")
        assert page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor") != UNSTYLED
        # The workbench's own stylesheet: its panels are framed.
        assert page.evaluate("getComputedStyle(document.querySelector('.wb-panel')).borderTopWidth") == "1px"
        page.screenshot(path=str(screenshots / "prod-landing.png"), full_page=True)

        # The docs as a non-staff user holding a token: the Swagger UI's scripts ran (under the
        # content security policy) and drew the schema they fetched.
        context.set_extra_http_headers({"Authorization": f"Token {production['key']}"})
        page.goto(f"{production['url']}/api/v1/docs/")
        page.wait_for_selector(".swagger-ui .info .title")
        assert "Warrant API" in page.locator(".swagger-ui .info .title").inner_text()
        assert page.locator(".opblock").count() > 10
        page.screenshot(path=str(screenshots / "prod-api-docs.png"))
    finally:
        context.close()
