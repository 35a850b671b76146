"""Webhook deliveries through the real endpoint: signature good, bad, stale, replayed, oversized,
schema-checked; the run a delivery starts is the service account's, tainted, and its receipt
records the trigger, the delivery id and the payload's digest."""

import hashlib
import json
import time

import pytest

from runs.models import Run
from tests.triggers.helpers import deliver, webhook
from triggers.models import TriggerFire

pytestmark = pytest.mark.django_db(transaction=True)

TICKET = {"ticket": {"title": "List all accounts.", "id": 4711}}


def test_a_signed_delivery_starts_a_run_as_the_service_account_with_its_origin_in_the_receipt(demo, operator):
    trigger, secret = webhook()
    answer = deliver("helpdesk", secret, TICKET, delivery="evt-1")
    assert answer.status_code == 202, answer.content
    data = answer.json()
    assert data["outcome"] == "started" and data["delivery_id"] == "evt-1"
    run = Run.objects.get(id=data["run"])
    assert run.caller.username == "helpdesk-bot" and run.input == "List all accounts."
    assert run.status == "succeeded"
    # A webhook's payload is untrusted input: the run is tainted from its start.
    assert run.tainted and "webhook payload of trigger helpdesk" in run.taint_reason
    body = json.loads(run.receipt.body)
    digest = hashlib.sha256(json.dumps(TICKET).encode()).hexdigest()
    assert body["origin"] == {"trigger": "helpdesk", "kind": "webhook", "delivery_id": "evt-1",
                              "payload_sha256": digest, "untrusted": True, "fire_id": data["fire"],
                              "set_up_by": []}
    assert body["caller"]["username"] == "helpdesk-bot"
    first = run.events.order_by("seq").first()
    assert first.kind == "run_created" and first.data["origin"]["delivery_id"] == "evt-1"
    fire = TriggerFire.objects.get(id=data["fire"])
    assert fire.run_id == run.id and fire.payload_sha256 == digest


@pytest.mark.parametrize("tamper", ["body", "secret", "timestamp", "missing", "format"])
def test_a_bad_signature_is_401_and_starts_nothing(demo, tamper):
    trigger, secret = webhook()
    body = json.dumps(TICKET).encode()
    now = str(int(time.time()))
    from triggers import signatures

    signature = {
        "body": signatures.sign(secret, now, body + b" "),
        "secret": signatures.sign(secret + "x", now, body),
        "timestamp": signatures.sign(secret, str(int(now) - 1), body),
        "missing": "",
        "format": signatures.sign(secret, now, body).removeprefix("sha256="),
    }[tamper]
    answer = deliver("helpdesk", secret, None, body=body, timestamp=int(now), signature=signature or "none")
    assert answer.status_code == 401, answer.content
    assert answer.json()["error"]["code"] == "bad_signature"
    assert Run.objects.count() == 0 and TriggerFire.objects.count() == 0


def test_a_stale_signature_is_401_and_the_window_is_the_triggers(demo):
    trigger, secret = webhook(replay_window_seconds=60)
    old = int(time.time()) - 61
    answer = deliver("helpdesk", secret, TICKET, timestamp=old)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "stale_signature"
    assert deliver("helpdesk", secret, TICKET, timestamp=old + 10).status_code == 202  # inside the minute
    assert Run.objects.count() == 1


def test_the_default_replay_window_is_five_minutes(demo):
    trigger, secret = webhook()
    assert trigger.replay_window_seconds == 300
    assert deliver("helpdesk", secret, TICKET, timestamp=int(time.time()) - 301).status_code == 401
    assert deliver("helpdesk", secret, TICKET, timestamp=int(time.time()) - 290).status_code == 202


def test_a_replayed_delivery_is_409_by_its_id_and_by_its_signed_message(demo):
    trigger, secret = webhook()
    stamp = int(time.time())
    assert deliver("helpdesk", secret, TICKET, delivery="evt-1", timestamp=stamp).status_code == 202
    same = deliver("helpdesk", secret, TICKET, delivery="evt-1", timestamp=stamp)
    assert same.status_code == 409 and same.json()["error"]["code"] == "conflict"
    # The same id with a new body and signature: still that delivery.
    assert deliver("helpdesk", secret, {"ticket": {"title": "Other"}}, delivery="evt-1").status_code == 409
    # The same signed message under a new delivery id (the id is not signed): a replay too.
    assert deliver("helpdesk", secret, TICKET, delivery="evt-2", timestamp=stamp).status_code == 409
    assert Run.objects.count() == 1 and TriggerFire.objects.count() == 1


def test_an_oversized_payload_is_413_before_its_signature_is_checked(demo):
    trigger, secret = webhook(max_payload_bytes=1024)
    big = {"ticket": {"title": "List all accounts.", "text": "x" * 2000}}
    answer = deliver("helpdesk", secret, big)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
    assert Run.objects.count() == 0 and TriggerFire.objects.count() == 0
    # At the limit is fine.
    body = json.dumps({"ticket": {"title": "List all accounts."}, "pad": ""}).encode()
    body = body.replace(b'"pad": ""', b'"pad": "' + b"y" * (1024 - len(body)) + b'"')
    assert len(body) == 1024
    assert deliver("helpdesk", secret, None, body=body).status_code == 202


def test_a_payload_that_misses_the_schema_is_422_recorded_and_starts_nothing(demo):
    schema = {"type": "object", "required": ["ticket"],
              "properties": {"ticket": {"type": "object", "required": ["title"],
                                        "properties": {"title": {"type": "string", "maxLength": 200}}}}}
    trigger, secret = webhook(payload_schema=schema)
    answer = deliver("helpdesk", secret, {"ticket": {"title": 7}}, delivery="bad-1")
    assert answer.status_code == 422, answer.content
    assert "ticket/title" in answer.json()["error"]["message"]
    fire = TriggerFire.objects.get()
    assert fire.outcome == "refused" and fire.delivery_id == "bad-1" and fire.run is None
    assert deliver("helpdesk", secret, {"ticket": {"title": 7}}, delivery="bad-1").status_code == 409
    assert deliver("helpdesk", secret, TICKET, delivery="good-1").status_code == 202
    assert Run.objects.count() == 1


def test_a_template_the_payload_cannot_fill_is_refused_not_run_with_a_hole(demo):
    trigger, secret = webhook(template="Ticket {{ payload.ticket.title }} from {{ payload.customer.name }}")
    answer = deliver("helpdesk", secret, TICKET)
    assert answer.status_code == 422 and "customer" in answer.json()["error"]["message"]
    assert Run.objects.count() == 0 and TriggerFire.objects.get().outcome == "refused"


def test_an_unknown_trigger_is_404_and_a_schedule_takes_no_deliveries(demo):
    from tests.triggers.helpers import schedule

    schedule("morning")
    assert deliver("nope", "s", TICKET).status_code == 404
    assert deliver("morning", "s", TICKET).status_code == 404


def test_a_rotated_secret_is_the_only_one_that_verifies(demo):
    from triggers.services import trigger_rotate_secret

    trigger, old = webhook()
    new = trigger_rotate_secret(trigger)
    assert new != old and old not in trigger.__class__.objects.get(pk=trigger.pk).secret_encrypted
    assert deliver("helpdesk", old, TICKET, delivery="a").status_code == 401
    assert deliver("helpdesk", new, TICKET, delivery="b").status_code == 202


def test_a_paused_trigger_records_the_delivery_and_starts_nothing(demo, admin):
    trigger, secret = webhook()
    assert admin.post("/api/v1/triggers/helpdesk/pause/").status_code == 200
    answer = deliver("helpdesk", secret, TICKET)
    assert answer.status_code == 202 and answer.json()["outcome"] == "skipped" and answer.json()["run"] is None
    assert "paused" in answer.json()["reason"] and Run.objects.count() == 0
