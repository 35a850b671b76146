"""What `make prod-smoke` does once the production processes are up: in Chromium, the admin and the
API docs with their stylesheets loaded, and the accounts a governance admin sets up there; through
the API, a governed run with an approval by a second user, /readyz and /metrics.

Nothing here reaches into the database: the browser and the API clients see only what the server
serves, as the people would.
"""

import os
import time
from pathlib import Path

import httpx

CHROMIUM = os.environ.get("WARRANT_CHROMIUM", "/usr/bin/chromium")
UNSTYLED = "rgba(0, 0, 0, 0)"  # the admin's header without its stylesheet has no background
TOOL = "smoke__send_notice"
AGENT = "notices"
REQUEST = "Send a notice to ops@example.com about the maintenance window."


class SmokeFailure(AssertionError):
    pass


def check(condition, message: str) -> None:
    if not condition:
        raise SmokeFailure(message)


class Stylesheets:
    """The stylesheet responses one browser context received, to check that each one loaded."""

    def __init__(self, context):
        self.seen: list[tuple[str, int]] = []
        context.on("response", lambda r: self.seen.append((r.url, r.status))
                   if r.request.resource_type == "stylesheet" else None)

    def check_loaded(self, what: str) -> int:
        check(self.seen, f"{what}: no stylesheet was requested")
        failed = [(url, status) for url, status in self.seen if status != 200]
        check(not failed, f"{what}: stylesheets that did not load: {failed}")
        count, self.seen = len(self.seen), []
        return count


def _sign_in(page, base: str, path: str, username: str, password: str) -> None:
    page.goto(f"{base}{path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("[type=submit]")
    page.wait_for_load_state()
    check("login" not in page.url, f"{username} could not sign in at {path}: {page.url}")


def _issue_token(context, base: str) -> str:
    """POST /api/v1/tokens/ from a signed-in session, as the sign-in page tells everyone to."""
    csrf = next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")
    answer = context.request.post(f"{base}/api/v1/tokens/", headers={"X-CSRFToken": csrf, "Referer": f"{base}/"},
                                  data={"name": "prod-smoke"})
    check(answer.status == 201, f"POST /api/v1/tokens/ answered {answer.status}: {answer.text()[:300]}")
    return answer.json()["key"]


def _add_account(page, base: str, username: str, password: str, role: str) -> None:
    """The workbench's user pages: add the account, then put it in its role."""
    page.goto(f"{base}/admin/auth/user/add/")
    page.fill("#id_username", username)
    page.fill("#id_password1", password)
    page.fill("#id_password2", password)
    page.click("input[name=_save]")
    page.wait_for_selector("#id_groups_from")
    page.select_option("#id_groups_from", label=role)
    page.click("#id_groups_add")
    page.click("input[name=_save]")
    page.wait_for_url(f"{base}/admin/auth/user/")
    saved = page.locator(".messagelist .success").inner_text()
    check(username in saved and "changed successfully" in saved, f"the account {username} was not saved: {saved}")


def browser_walk(base: str, admin: tuple[str, str], people: dict[str, tuple[str, str]], shots: Path,
                 phase) -> dict[str, str]:
    """The admin's pages styled, the accounts in `people` (username: (password, role)) made there, the
    API docs styled and drawn for a user who is not staff; an API token for the admin and each person."""
    from playwright.sync_api import sync_playwright

    tokens = {}
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            with phase("admin in Chromium: styled, two accounts made"):
                context = browser.new_context(viewport={"width": 1366, "height": 768})
                sheets = Stylesheets(context)
                page = context.new_page()
                page.set_default_timeout(20_000)
                page.goto(f"{base}/admin/login/")
                check(page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor") != UNSTYLED,
                      "the admin's sign-in page is unstyled")
                sheets.check_loaded("the admin's sign-in page")
                _sign_in(page, base, "/admin/login/?next=/admin/", *admin)
                check(page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor") != UNSTYLED,
                      "the admin's index is unstyled")
                sheets.check_loaded("the admin's index")
                page.screenshot(path=str(shots / "admin.png"), full_page=True)
                for username, (password, role) in people.items():
                    _add_account(page, base, username, password, role)
                sheets.check_loaded("the admin's user pages")
                tokens[admin[0]] = _issue_token(context, base)
                context.close()
            with phase("API docs in Chromium, and the people's tokens"):
                for username, (password, _) in people.items():
                    context = browser.new_context(viewport={"width": 1366, "height": 768})
                    page = context.new_page()
                    page.set_default_timeout(20_000)
                    sheets = Stylesheets(context)
                    _sign_in(page, base, "/accounts/login/", username, password)
                    tokens[username] = _issue_token(context, base)
                    if len(tokens) == 2:  # the first person: not staff, yet the docs are theirs to read
                        page.goto(f"{base}/api/v1/docs/")
                        page.wait_for_selector(".swagger-ui .info .title")
                        check("Warrant API" in page.locator(".swagger-ui .info .title").inner_text(), "no API title")
                        check(page.locator(".opblock").count() > 10, "the Swagger UI drew no operations")
                        check(page.evaluate("getComputedStyle(document.querySelector('.opblock')).borderTopStyle")
                              == "solid", "the API docs are unstyled (an operation has no border)")
                        sheets.check_loaded("the API docs")
                        page.screenshot(path=str(shots / "api-docs.png"))
                    context.close()
        finally:
            browser.close()
    return tokens


def _client(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=f"{base}/api/v1", timeout=30, headers={"Authorization": f"Token {token}"})


def _ok(answer: httpx.Response, *statuses: int) -> dict:
    check(answer.status_code in (statuses or (200,)),
          f"{answer.request.method} {answer.request.url.path} answered {answer.status_code}: {answer.text[:500]}")
    return answer.json() if answer.content else {}


def _until(read, done, what: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        check(time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}: {value}")
        time.sleep(0.2)


def governed_run(base: str, tokens: dict[str, str], *, admin: str, operator: str, approver: str, phase) -> dict:
    """A governance admin registers a tool and puts it under approval; the operator's run parks at it,
    the approver approves, and the run ends succeeded with a receipt that verifies."""
    gov, op, ap = _client(base, tokens[admin]), _client(base, tokens[operator]), _client(base, tokens[approver])
    with phase("API: tool, grant, model profile, agent, approval policy"):
        # What bootstrap left: roles, no demo (no agent, tool or profile), and the two accounts just made.
        check(_ok(gov.get("/agents/"))["count"] == 0 and _ok(gov.get("/tools/"))["count"] == 0
              and _ok(gov.get("/model-profiles/"))["count"] == 0, "the database holds demo data")
        members = {role["name"]: role["members"] for role in _ok(gov.get("/roles/"))["results"]}
        check(members == {"operators": 1, "secops": 1, "compliance": 0, "governance-admins": 1},
              f"the roles and their members: {members}")
        _ok(gov.post("/tool-sources/", json={"name": "smoke", "kind": "python", "path": "tests.prod.smoke_tools"}), 201)
        report = _ok(gov.post("/tool-sources/smoke/sync/"))
        check(report.get("created") == [TOOL], f"the sync made {report.get('created')}, not [{TOOL}]")
        _ok(gov.patch(f"/tools/{TOOL}/", json={"enabled": True, "side_effect": True}))
        _ok(gov.post("/grants/", json={"role": "operators", "tool": TOOL}), 201)
        _ok(gov.post("/model-profiles/", json={"name": "scripted", "backend": "scripted", "model": "scripted-1"}), 201)
        _ok(gov.post("/agents/", json={"slug": AGENT, "name": "Notices", "instructions": "Send the notices asked for.",
                                       "model_profile": "scripted", "tools": [TOOL]}), 201)
        _ok(gov.post(f"/agents/{AGENT}/publish/"), 200, 201)
        _ok(gov.post("/policies/", json={"name": "notices-need-secops", "type": "tool_approval",
                                         "target_tools": [TOOL], "approver_role": "secops"}), 201)
    with phase("API: the operator's run, to its approval"):
        run = _ok(op.post("/runs/", json={"agent": AGENT, "input": REQUEST}, headers={"Idempotency-Key": "smoke-1"}), 201)
        run = _until(lambda: _ok(op.get(f"/runs/{run['id']}/")), lambda r: r["status"] not in ("queued", "running"),
                     "the run to reach its approval")
        check(run["status"] == "awaiting_approval", f"the run is {run['status']}, not awaiting_approval: {run}")
        check(run["pending_approval"]["tool"] == TOOL, f"it waits for {run['pending_approval']}")
    with phase("API: the approver approves, the run ends with a receipt"):
        pending = _ok(ap.get("/approvals/", params={"status": "pending"}))["results"]
        approval = next((a for a in pending if a["run_id"] == run["id"]), None)
        check(approval is not None, f"the approver's queue lacks the run's request: {pending}")
        check(_ok(op.get("/approvals/", params={"status": "pending"}))["results"] == [],
              "the operator sees the approver's queue")
        check(op.post(f"/approvals/{approval['id']}/approve/", json={"reason": "mine"}).status_code == 404,
              "the operator could approve their own run's request")
        _ok(ap.post(f"/approvals/{approval['id']}/approve/", json={"reason": "prod-smoke"}))
        run = _until(lambda: _ok(op.get(f"/runs/{run['id']}/")), lambda r: r["status"] not in ("queued", "running"),
                     "the approved run to finish")
        check(run["status"] == "succeeded" and run.get("receipt_id"), f"the run ended {run['status']}: {run}")
        events = _ok(op.get(f"/runs/{run['id']}/events/", params={"limit": 200}))["results"]
        calls = [e["data"] for e in events if e["kind"] == "tool_call"]
        check([(c["name"], c["ok"], c["approval_id"], c["result"].get("data", {}).get("sent")) for c in calls]
              == [(TOOL, True, approval["id"], True)], f"the trace's tool calls: {calls}")
        verdict = _ok(op.get(f"/receipts/{run['receipt_id']}/verify/"))
        check(verdict.get("valid") is True, f"the receipt does not verify: {verdict}")
    return run


def read_health(base: str, metrics_token: str, agent: str, phase) -> dict:
    """/readyz ready on PostgreSQL with the broker and the key; /metrics, as Prometheus scrapes it
    with its bearer token, counting the run that succeeded."""
    found = {}
    with phase("/readyz and /metrics"):
        ready = httpx.get(f"{base}/readyz", timeout=30)
        body = ready.json()
        check(ready.status_code == 200 and body["ready"], f"/readyz: {ready.status_code} {body}")
        check(body["checks"]["database"].get("vendor") == "postgresql", f"/readyz database: {body['checks']}")
        found["readyz"] = {name: entry["ok"] for name, entry in body["checks"].items()}
        check(httpx.get(f"{base}/metrics", timeout=30).status_code == 403, "/metrics answers without its token")
        metrics = httpx.get(f"{base}/metrics", timeout=30, headers={"Authorization": f"Bearer {metrics_token}"})
        check(metrics.status_code == 200, f"/metrics answered {metrics.status_code}: {metrics.text[:300]}")
        samples = {}
        for line in metrics.text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                samples[series] = float(value)
        down = [series for series, value in samples.items() if series.startswith("warrant_metrics_section_up") and not value]
        check(not down, f"/metrics sections whose queries failed: {down}")
        succeeded = [value for series, value in samples.items() if series.startswith("warrant_runs_finished_total{")
                     and f'agent="{agent}"' in series and 'status="succeeded"' in series]
        check(succeeded == [1.0], f"/metrics does not count the run that succeeded: {succeeded}")
        found["metrics"] = f"{len(samples)} samples, warrant_runs_finished_total{{agent={agent!r}, status='succeeded'}} 1"
    return found
