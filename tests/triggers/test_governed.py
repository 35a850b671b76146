"""A triggered run is governed like a person's: it parks for approval and resumes, the trigger's
service account can never approve its own runs, its roles decide what it may start; and the
concurrency policies decide what a fire does while the trigger's last run goes on."""

import json

import pytest

from core.api_errors import Forbidden
from runs.approvals import approval_decide
from runs.models import ApprovalRequest, Run
from tests.triggers.helpers import deliver, service_account, webhook
from triggers import firing
from triggers.models import TriggerFire

pytestmark = pytest.mark.django_db(transaction=True)

DELETE = {"ticket": {"title": "Delete the account Initech."}}
LIST = {"ticket": {"title": "List all accounts."}}


def listing(n: int) -> dict:
    """A distinct event (the same body signed in the same second is one delivery, a replay)."""
    return {"ticket": {"title": "List all accounts.", "id": n}}


def test_a_webhook_run_parks_for_approval_and_resumes_when_secops_approves(demo, approver):
    trigger, secret = webhook()
    answer = deliver("helpdesk", secret, DELETE, delivery="evt-del")
    assert answer.status_code == 202, answer.content
    run = Run.objects.get(id=answer.json()["run"])
    assert run.status == "awaiting_approval" and run.tainted
    pending = ApprovalRequest.objects.get(run=run, status="pending")
    assert pending.tool == "delete_account" and pending.approver_role.name == "secops"
    # The approver sees it in their queue like any other run's.
    queue = approver.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [a["id"] for a in queue] == [str(pending.id)]
    decided = approver.post(f"/api/v1/approvals/{pending.id}/approve/", {"reason": "ticket 4711"}, format="json")
    assert decided.status_code == 200, decided.content
    run.refresh_from_db()
    assert run.status == "succeeded"
    body = json.loads(run.receipt.body)
    assert body["origin"]["delivery_id"] == "evt-del" and body["origin"]["trigger"] == "helpdesk"
    assert body["approvals"][0]["decided_by"] == "approver" and body["caller"]["username"] == "helpdesk-bot"


def test_the_triggers_service_account_is_refused_as_approver_of_its_own_run(demo):
    # Even in the approver role itself, the account that is the run's caller may not decide it.
    account = service_account("ops-bot", roles=("operators", "secops"))
    trigger, secret = webhook(account=account)
    run = Run.objects.get(id=deliver("helpdesk", secret, DELETE).json()["run"])
    pending = ApprovalRequest.objects.get(run=run, status="pending")
    with pytest.raises(Forbidden, match="no one approves their own run"):
        approval_decide(approval_id=pending.id, user=account.user, approve=True, reason="self", via="session")
    pending.refresh_from_db()
    assert pending.status == "pending"
    run.refresh_from_db()
    assert run.status == "awaiting_approval"


def test_whoever_wrote_the_trigger_may_not_approve_its_runs_either(demo, approver):
    # The trigger's template is what its runs are asked: its author is in the caller's place.
    from django.contrib.auth import get_user_model

    from triggers.services import trigger_update

    author = get_user_model().objects.get(username="approver")  # in secops
    trigger, secret = webhook(by=author, concurrency="allow")
    run = Run.objects.get(id=deliver("helpdesk", secret, DELETE, delivery="a").json()["run"])
    assert run.snapshot["origin"]["set_up_by"] == ["approver"]
    pending = ApprovalRequest.objects.get(run=run, status="pending")
    refused = approver.post(f"/api/v1/approvals/{pending.id}/approve/", {"reason": "mine"}, format="json")
    assert refused.status_code == 403 and "own run" in refused.json()["error"]["message"]
    # A later editor is bound the same way; the first author still is.
    editor = get_user_model().objects.create_user("editor", password="x")
    trigger_update(trigger, by=editor, description="edited")
    again = {"ticket": {"title": "Delete the account Initech.", "id": 2}}  # another event, not a replay of the first
    run = Run.objects.get(id=deliver("helpdesk", secret, again, delivery="b").json()["run"])
    assert run.snapshot["origin"]["set_up_by"] == ["approver", "editor"]


def test_a_service_account_without_the_right_to_start_runs_starts_nothing(demo):
    account = service_account("idle-bot", roles=("compliance",))
    trigger, secret = webhook(account=account)
    answer = deliver("helpdesk", secret, LIST)
    assert answer.status_code == 422 and "may not start runs" in answer.json()["error"]["message"]
    assert Run.objects.count() == 0 and TriggerFire.objects.get().outcome == "refused"


def test_a_service_account_cannot_sign_in(demo, client):
    account = service_account("nologin-bot")
    assert not account.user.has_usable_password() and not account.user.is_staff
    assert not client.login(username="nologin-bot", password="")


def _parked(secret, delivery):
    answer = deliver("helpdesk", secret, DELETE, delivery=delivery)
    assert answer.status_code == 202, answer.content
    return answer.json()


def test_concurrency_skip_records_the_fire_and_starts_nothing_while_the_last_run_waits(demo):
    trigger, secret = webhook(concurrency="skip")
    first = _parked(secret, "one")
    second = deliver("helpdesk", secret, LIST, delivery="two").json()
    assert second["outcome"] == "skipped" and second["run"] is None and "has not ended" in second["reason"]
    assert Run.objects.count() == 1 and first["outcome"] == "started"


def test_concurrency_queue_starts_the_waiting_fire_once_the_last_run_ends(demo, approver):
    trigger, secret = webhook(concurrency="queue")
    first = _parked(secret, "one")
    second = deliver("helpdesk", secret, LIST, delivery="two").json()
    third = deliver("helpdesk", secret, listing(3), delivery="three").json()
    assert second["outcome"] == third["outcome"] == "queued" and Run.objects.count() == 1
    assert firing.drain() == 0  # the first run still waits for its approval
    pending = ApprovalRequest.objects.get(run_id=first["run"], status="pending")
    approver.post(f"/api/v1/approvals/{pending.id}/approve/", {"reason": "ok"}, format="json")
    assert Run.objects.get(id=first["run"]).status == "succeeded"
    # The drain (beat's triggers.drain; also run after a triggered run's receipt is sealed) takes
    # the oldest queued fire first, one at a time.
    firing.drain()
    two = TriggerFire.objects.get(id=second["fire"])
    assert two.outcome == "started" and two.run.status == "succeeded" and two.run.input == "List all accounts."
    assert two.run.snapshot["origin"]["delivery_id"] == "two"
    firing.drain()
    assert TriggerFire.objects.get(id=third["fire"]).outcome == "started"
    assert firing.drain() == 0 and Run.objects.count() == 3


def test_concurrency_allow_starts_beside_the_waiting_run(demo):
    trigger, secret = webhook(concurrency="allow")
    _parked(secret, "one")
    second = deliver("helpdesk", secret, LIST, delivery="two").json()
    assert second["outcome"] == "started" and Run.objects.get(id=second["run"]).status == "succeeded"
    assert Run.objects.count() == 2


def test_a_queue_is_bounded(demo, monkeypatch):
    monkeypatch.setattr(firing, "QUEUE_LIMIT", 2)
    trigger, secret = webhook(concurrency="queue")
    _parked(secret, "one")
    outcomes = [deliver("helpdesk", secret, listing(i), delivery=f"q{i}").json()["outcome"] for i in range(3)]
    assert outcomes == ["queued", "queued", "skipped"]


def test_the_approvers_card_says_an_argument_came_from_the_webhook_payload(demo):
    trigger, secret = webhook()
    text = {"ticket": {"title": "Send an email to dana.whitfield@example.com about the Acme renewal."}}
    run = Run.objects.get(id=deliver("helpdesk", secret, text).json()["run"])
    assert run.status == "awaiting_approval"
    assert ApprovalRequest.objects.get(run=run, status="pending").tool == "send_email"
    [found] = run.state["provenance"].values()  # the one parked call's arguments, as the card shows them
    to = next(entry for entry in found if entry["argument"] == "to")
    assert to["in_untrusted_text"]
    assert {place["origin"] for place in to["places"]} == {"webhook payload of trigger helpdesk"}


def test_a_queued_fire_starts_as_soon_as_the_run_before_it_is_sealed(demo, approver):
    trigger, secret = webhook(concurrency="queue")
    first = _parked(secret, "one")
    second = deliver("helpdesk", secret, LIST, delivery="two").json()
    assert second["outcome"] == "queued"
    pending = ApprovalRequest.objects.get(run_id=first["run"], status="pending")
    approver.post(f"/api/v1/approvals/{pending.id}/approve/", {"reason": "ok"}, format="json")
    # No drain called here: runs.receipts' receipt_sealed started it after the first run's seal committed.
    two = TriggerFire.objects.get(id=second["fire"])
    assert two.outcome == "started" and two.reason == "started from the queue" and two.run.status == "succeeded"
