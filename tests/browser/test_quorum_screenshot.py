"""The approval card of a request that needs two approvers, after the first approved, as the second
sees it in Chromium (var/screenshots/approval-quorum.png). A server of this module's own, since the
demo's secops policy asks two approvers here and the other browser tests decide with one."""

import pytest

from tests.browser.servers import PASSWORD, api_client, demo_with_tokens, free_port, live_env, runserver

pytestmark = pytest.mark.browser

# A second member of secops, and the demo's secops policy set to a quorum of two (through the
# services, as the tests' own setup does: below the policy gate).
SETUP = (
    "from django.contrib.auth.models import Group; from governance import services as gs; "
    "from governance.models import Policy; "
    f"u = get_user_model().objects.create_user('approver2', password='{PASSWORD}', is_staff=True); "
    "u.groups.add(Group.objects.get(name='secops')); "
    "gs.policy_update(policy=Policy.objects.get(name='side-effects-need-secops'), values={'quorum': 2}); ")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("warrant-quorum")
    env = live_env(data_dir)
    tokens = demo_with_tokens(env, ["operator", "approver"], setup=SETUP)
    with runserver(env, free_port(), data_dir / "server.log") as base:
        yield {"url": base, "tokens": tokens, "log": data_dir / "server.log"}


@pytest.fixture(scope="module")
def api(server):
    return lambda user: api_client(server["url"], server["tokens"][user])


def test_the_second_approver_sees_one_of_two_and_who_approved(page, api):
    run = api("operator").post("/runs/", json={"agent": "crm-assistant", "input": "Delete the account Globex."}).json()
    approval = run["pending_approval"]
    assert run["status"] == "awaiting_approval", run
    assert api("approver").get(f"/approvals/{approval['id']}/").json()["quorum"] == 2
    first = api("approver").post(f"/approvals/{approval['id']}/approve/", json={"reason": "checked the contract"})
    assert first.status_code == 200 and first.json()["status"] == "pending", first.text

    page.login("approver2")
    page.goto(f"{page.base}/admin/runs/approvalrequest/queue/")
    card = page.locator(f"#approval-{approval['id']}")
    assert page.locator(f"#quorum-{approval['id']}").inner_text() == (
        "1 of 2, by approver (each from a different member; one denial denies)")
    assert card.locator("form.wb-decide").count() == 1  # the second may still decide
    path = page.shot("approval-quorum")
    assert path.stat().st_size > 10_000
