"""A run refused something reads amber in the runs list, in Chromium against a live server (#20 item 6)."""

import pytest

pytestmark = pytest.mark.browser


def test_a_denied_delete_reads_succeeded_one_refused_in_amber_in_the_runs_list(page, api):
    plain = api("operator").post("/runs/", json={"agent": "crm-assistant", "input": "List all accounts."}).json()
    assert plain["status"] == "succeeded" and plain["refused"] == {"count": 0, "kinds": []}
    run = api("operator").post("/runs/", json={"agent": "crm-assistant", "input": "Delete the account Globex."}).json()
    denied = api("approver").post(f"/approvals/{run['pending_approval']['id']}/deny/",
                                  json={"reason": "not without the signed contract"})
    assert denied.status_code == 200, denied.text
    assert api("operator").get(f"/runs/{run['id']}/").json()["refused"] == {"count": 1, "kinds": ["denied"]}

    page.login("compliance")
    page.goto(f"{page.base}/admin/runs/run/")
    badge = page.locator("#result_list span.wb-refused").first
    assert badge.inner_text() == "Succeeded · 1 refused"
    # Amber (the wb-warn colours), not the green of a run that did everything it set out to do.
    assert badge.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 244, 214)"
    done = page.locator(f"#result_list tr:has(a:text-is('{plain['id'][:8]}')) span.wb-status")
    assert done.inner_text() == "Succeeded" and "wb-status-succeeded" in done.get_attribute("class")
    page.shot("refused-run-list")
