"""A real Warrant server (runserver on loopback, its own SQLite file, the demo loaded) and a real
Chromium driven by Playwright. Nothing here touches the test database: the browser and the API
client see only what the server serves.

Chromium is Debian's (`make browser-deps` installs it); Playwright's own browser download is not
used. Screenshots of every page land in var/screenshots/ (not committed).
"""

import os
import socket
import shutil
from pathlib import Path

import httpx
import pytest

from tests.browser.servers import ROOT, manage, runserver

CHROMIUM = os.environ.get("WARRANT_CHROMIUM", "/usr/bin/chromium")
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


PORT = int(os.environ.get("WARRANT_BROWSER_PORT") or _free_port())
SCREENSHOTS = ROOT / "var" / "screenshots"
PASSWORD = "warrant-demo"

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}: run `make browser-deps` (apt-get install chromium chromium-driver)",
                allow_module_level=True)


def _env(data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_DEBUG="1", WARRANT_DATA_DIR=str(data_dir), DEMO_PASSWORD=PASSWORD, WARRANT_TEST_FAST_HASHER="1",
               PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """Base URL of a live Warrant with the demo loaded, and an API token per demo user."""
    data_dir = tmp_path_factory.mktemp("warrant-browser")
    env = _env(data_dir)
    manage(env, "migrate", "--noinput")
    # One interpreter for the demo, a secops member who may also start runs (the
    # separation-of-duties case) and an API token per user: each manage.py start costs seconds.
    out = manage(env, "shell", "-c", (
        "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group; "
        "from governance.tokens import token_issue; from runs.demo import demo_load; demo_load(); "
        f"u = get_user_model().objects.create_user('dual', password='{PASSWORD}', is_staff=True); "
        "u.groups.add(*Group.objects.filter(name__in=['operators', 'secops'])); "
        "print('TOKENS', *(n + '=' + token_issue(user=get_user_model().objects.get(username=n), via='command', issued_by='test')[1] "
        "for n in ['operator', 'approver', 'compliance', 'dual']))"))
    line = next(line for line in out.splitlines() if line.startswith("TOKENS "))
    tokens = dict(pair.split("=") for pair in line.split()[1:])
    with runserver(env, PORT, data_dir / "server.log") as base:
        yield {"url": base, "tokens": tokens, "log": data_dir / "server.log"}


@pytest.fixture(scope="session")
def api(server):
    def client(user: str) -> httpx.Client:
        return httpx.Client(base_url=f"{server['url']}/api/v1", timeout=30,
                            headers={"Authorization": f"Token {server['tokens'][user]}"})
    return client


@pytest.fixture(scope="module")
def browser():
    """Chromium, for one test module. Not for the session: Playwright's sync API keeps an event loop
    running in this thread while it is open, and Django refuses database work in a thread with a
    running loop (SynchronousOnlyOperation), so every test after it in the same process would fail."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Root in a container has no user namespaces for Chromium's sandbox.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshots():
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS


@pytest.fixture
def page(browser, server, screenshots):
    """A fresh browser context (no cookies) at laptop size, with `shot(name)` and `login(user)`."""
    context = browser.new_context(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    base = server["url"]

    def shot(name: str) -> Path:
        path = screenshots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    def login(user: str, password: str = PASSWORD) -> None:
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", user)
        page.fill("#id_password", password)
        page.click("input[type=submit]")

    page.base = base
    page.shot = shot
    page.login = login
    yield page
    context.close()
