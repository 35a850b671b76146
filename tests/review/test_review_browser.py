"""Compliance review in Debian's Chromium against a live server of its own (runserver on loopback,
its own SQLite file, the demo loaded, runs made through the API), on the first free port of
8170-8179. Screenshots: var/screenshots/review-queue.png, review-page.png, review-records.png,
review-tampered.png, review-rules.png.
"""

import sqlite3

import pytest

from tests.browser.conftest import browser  # noqa: F401 (a fixture)
from tests.browser.servers import ROOT, api_client, demo_with_tokens, free_port, live_env, login, runserver

pytestmark = pytest.mark.browser
SHOTS = ROOT / "var" / "screenshots"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    data_dir, port = tmp_path_factory.mktemp("warrant-review-queue"), free_port(range(8170, 8180))
    env = live_env(data_dir)
    tokens = demo_with_tokens(env, ["operator", "approver", "compliance"])
    with runserver(env, port, data_dir / "server.log") as base:
        _work(base, tokens)
        yield base, data_dir / "warrant.sqlite3"


def _work(base: str, tokens: dict) -> None:
    """Rules first, then a day of runs: a blocked question, an email denied, a delete approved, an answer."""
    operator, approver, compliance = (api_client(base, tokens[user]) for user in ("operator", "approver", "compliance"))
    for rule in ({"name": "every-denial-and-block", "always": ["denial", "expiry", "blocked", "policy_error"],
                  "note": "auditors read every refusal"},
                 {"name": "destructive-tools", "always": ["tool"], "tools": ["delete_account"]},
                 {"name": "five-percent", "percentage": 5}):
        assert compliance.post("/review/rules/", json=rule).status_code == 201
    for text in ("What is Dana Whitfield's salary?", "How healthy is Acme Corp?"):
        assert operator.post("/runs/", json={"agent": "crm-assistant", "input": text}).status_code == 201
    for text, verb, reason in (("Delete the account Initech.", "approve", "customer asked"),
                               ("Send an email to dana.whitfield@example.com about the Acme renewal.", "deny",
                                "not before the renewal call")):
        run = operator.post("/runs/", json={"agent": "crm-assistant", "input": text}).json()
        assert approver.post(f"/approvals/{run['pending_approval']['id']}/{verb}/", json={"reason": reason}).status_code == 200


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"review-{name}.png"), full_page=True)


def test_queue_review_page_records_and_a_tampered_record(browser, live):  # noqa: F811
    base, database = live
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        login(page, base, "compliance")
        page.wait_for_selector("#review-links")
        page.click("#review-links a:first-child")
        page.wait_for_url("**/admin/review/reviewitem/")
        rows = page.locator("#result_list tbody tr")
        listed = page.locator("#result_list").inner_text()
        assert rows.count() >= 3, listed
        assert "every-denial-and-block: denial" in listed and "destructive-tools: tool" in listed
        assert "every-denial-and-block: blocked" in listed
        _shot(page, "queue")

        page.locator("#result_list tbody tr", has_text="denial").locator("a").first.click()
        page.wait_for_selector("#review-verification")
        for column in ("#review-receipt", "#review-trace", "#review-verification"):
            assert page.locator(column).is_visible()
        boxes = [page.locator(c).bounding_box() for c in ("#review-receipt", "#review-trace", "#review-verification")]
        assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and abs(boxes[0]["y"] - boxes[2]["y"]) < 2  # side by side
        assert "VALID" in page.locator("#review-verification").inner_text()
        assert "approver" not in page.locator("#assign-form select").inner_text()
        page.select_option("#assign-form select", "compliance")
        page.click("#assign-form input[type=submit]")
        page.wait_for_selector("#record-form")
        _shot(page, "page")

        page.select_option("#id_kind", "finding")
        page.select_option("#id_severity", "medium")
        page.fill("#id_note", "The denial reason does not cite the policy; ask secops to name it.")
        page.click("#record-form input[type=submit]")
        page.wait_for_selector("#review-records")
        page.select_option("#id_kind", "follow_up")
        page.fill("#id_note", "secops now cite the policy in every denial (checked 3 later runs).")
        page.check("#id_resolves")
        page.click("#record-form input[type=submit]")
        page.wait_for_selector("text=Record #2 (follow_up) sealed")
        assert "Resolved" in page.locator("#review-state").inner_text()
        assert page.locator("#review-records tbody tr").count() == 2
        assert "all 2 review records signed and chained" in page.locator("#review-verification").inner_text()
        _shot(page, "records")

        # Someone with the database file drops the trigger and softens the finding.
        with sqlite3.connect(database) as db:
            db.execute("DROP TRIGGER review_reviewrecord_no_update")
            db.execute("UPDATE review_reviewrecord SET note = 'Nothing to report.' WHERE seq = 1")
        page.reload()
        verdict = page.locator("#review-verification").inner_text()
        assert "INVALID" in verdict and "note differ" in verdict and "append-only trigger" in verdict, verdict
        _shot(page, "tampered")

        page.goto(f"{base}/admin/review/samplingrule/")
        assert page.locator("#result_list tbody tr").count() == 3
        _shot(page, "rules")
    finally:
        context.close()
