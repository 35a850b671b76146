"""Receipts: a canonical, chained, append-only record that tampering cannot hide."""

import json

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection

from runs import services
from runs.models import Receipt, RunEvent
from runs.receipts import GENESIS, canonical, chain_hash

pytestmark = pytest.mark.django_db


def _tamper(sql: str, params: list) -> None:
    """What someone with raw database access could do; on PostgreSQL that takes a superuser
    switching the append-only triggers off for the session."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)


def _finished_runs(count: int) -> list[Receipt]:
    operator = User.objects.get(username="operator")
    for i in range(count):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=f"List all accounts. ({i})", caller=operator)
        services.run_advance(run_id=run.id)
    return list(Receipt.objects.order_by("seq"))


def test_the_chain_links_canonical_bodies(demo):
    receipts = _finished_runs(3)
    assert [r.seq for r in receipts] == [1, 2, 3]
    assert receipts[0].prev_hash == GENESIS
    for prev, receipt in zip([None, *receipts], receipts):
        assert receipt.prev_hash == (prev.hash if prev else GENESIS)
        assert receipt.hash == chain_hash(receipt.prev_hash, receipt.body)
        assert canonical(json.loads(receipt.body)) == receipt.body
    body = json.loads(receipts[0].body)
    for key in ("run_id", "agent", "caller", "status", "input_sha256", "output_sha256", "policy_snapshot_sha256",
                "policies_fired", "skills_used", "model_calls", "tool_calls", "approvals", "totals",
                "started_at", "finished_at"):
        assert key in body
    call_command("verify_receipts")


def test_one_changed_byte_is_detected_and_the_receipt_named(demo):
    receipts = _finished_runs(3)
    tampered = receipts[1]
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [tampered.id.hex])
    # manage.py turns this CommandError into exit status 1.
    with pytest.raises(CommandError, match=f"#2 \\(receipt {tampered.id}\\)") as error:
        call_command("verify_receipts")
    assert error.value.returncode == 1


def test_the_api_verify_names_the_first_broken_receipt(demo, compliance):
    receipts = _finished_runs(2)
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"crm-assistant\"', '\"crm-assistanT\"') WHERE id = %s",
            [receipts[0].id.hex])
    verdict = compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()
    assert verdict == {"valid": False, "receipt": str(receipts[0].id), "seq": 1,
                       "reason": "hash does not match the body: the body was altered"}


def test_receipts_and_events_refuse_update_and_delete_through_the_orm(demo):
    receipt = _finished_runs(1)[0]
    receipt.body = "{}"
    with pytest.raises(ValidationError):
        receipt.save()
    with pytest.raises(ValidationError):
        receipt.delete()
    with pytest.raises(ValidationError):
        Receipt.objects.filter(pk=receipt.pk).update(hash="0" * 64)
    with pytest.raises(ValidationError):
        Receipt.objects.all().delete()
    event = RunEvent.objects.first()
    with pytest.raises(ValidationError):
        event.save()
    with pytest.raises(ValidationError):
        RunEvent.objects.all().delete()
    assert Receipt.objects.get(pk=receipt.pk).body != "{}"
