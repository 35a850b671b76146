"""A real Warrant server (runserver on loopback, its own SQLite file, the demo loaded) and a real
Chromium driven by Playwright. Nothing here touches the test database: the browser and the API
client see only what the server serves.

Chromium is Debian's (`make browser-deps` installs it); Playwright's own browser download is not
used. Screenshots of every page land in var/screenshots/ (not committed).
"""

import os
from pathlib import Path

import pytest

from tests.browser.servers import PASSWORD, ROOT, api_client, demo_with_tokens, free_port, live_env, login, runserver

CHROMIUM = os.environ.get("WARRANT_CHROMIUM", "/usr/bin/chromium")
PORT = int(os.environ.get("WARRANT_BROWSER_PORT") or free_port())
SCREENSHOTS = ROOT / "var" / "screenshots"

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}: run `make browser-deps` (apt-get install chromium chromium-driver)",
                allow_module_level=True)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """Base URL of a live Warrant with the demo loaded, and an API token per demo user."""
    data_dir = tmp_path_factory.mktemp("warrant-browser")
    env = live_env(data_dir)
    # Besides the demo's users, a secops member who may also start runs (the separation-of-duties case).
    tokens = demo_with_tokens(env, ["operator", "approver", "compliance", "dual"], setup=(
        "from django.contrib.auth.models import Group; "
        f"u = get_user_model().objects.create_user('dual', password='{PASSWORD}', is_staff=True); "
        "u.groups.add(*Group.objects.filter(name__in=['operators', 'secops'])); "))
    with runserver(env, PORT, data_dir / "server.log") as base:
        yield {"url": base, "tokens": tokens, "log": data_dir / "server.log"}


@pytest.fixture(scope="session")
def api(server):
    return lambda user: api_client(server["url"], server["tokens"][user])


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
    # Each shot overwrites the last one of its name. Not emptied first: pytest-xdist processes
    # start their sessions side by side, and one would delete the folder another writes to.
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
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

    page.base = base
    page.shot = shot
    page.login = lambda user: login(page, base, user)
    yield page
    context.close()
