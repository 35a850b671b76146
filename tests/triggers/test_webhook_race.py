"""Two copies of one delivery racing each other (a sender's retry on a timeout, a proxy's duplicate)
start one run: the trigger's row lock and the unique constraints decide, not a read before a write."""

import json
import time

import pytest
from django.db import connection

from core.api_errors import Conflict
from runs.models import Run
from tests.triggers.helpers import race, webhook
from triggers import signatures, webhooks
from triggers.models import TriggerFire

pytestmark = pytest.mark.django_db(transaction=True)

COPIES = 6


class _Body:
    def __init__(self, body: bytes):
        self.body = body

    def read(self, limit: int) -> bytes:
        return self.body[:limit]


def test_copies_of_one_delivery_racing_start_one_run(demo):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises every writer already; the race is PostgreSQL's")
    trigger, secret = webhook(concurrency="allow")
    body = json.dumps({"ticket": {"title": "List all accounts."}}).encode()
    stamp = str(int(time.time()))
    meta = {webhooks.TIMESTAMP: stamp, webhooks.SIGNATURE: signatures.sign(secret, stamp, body),
            webhooks.DELIVERY: "evt-race", "CONTENT_LENGTH": str(len(body))}

    def send():
        try:
            return webhooks.receive("helpdesk", stream=_Body(body), meta=meta).outcome
        except Conflict:
            return "replay"

    outcomes = race(send, COPIES)
    assert sorted(outcomes) == ["replay"] * (COPIES - 1) + ["started"]
    assert TriggerFire.objects.count() == 1 and Run.objects.count() == 1
