"""Receipts: a canonical, chained, append-only record that tampering cannot hide."""

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.test import override_settings

from runs import services
from runs.models import Receipt, ReceiptCheckpoint, RunEvent
from runs.receipts import (
    GENESIS,
    canonical,
    chain_hash,
    receipt_seal_mark,
    receipt_verify_chain,
    receipt_verify_since_checkpoint,
)

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


# --- what verification detects, one tampering each -----------------------------------------------


def _rechain_from(seq: int) -> None:
    """A forger who recomputes every hash from receipt #seq on, so the chain itself is consistent again.

    The forger does not hold the server's key: the marks stay as they were."""
    prev_hash = Receipt.objects.get(seq=seq - 1).hash if seq > 1 else GENESIS
    for receipt in Receipt.objects.filter(seq__gte=seq).order_by("seq"):
        new_hash = chain_hash(prev_hash, receipt.body)
        _tamper("UPDATE runs_receipt SET prev_hash = %s, hash = %s WHERE id = %s", [prev_hash, new_hash, receipt.id.hex])
        prev_hash = new_hash


def _verdict():
    result = receipt_verify_chain()
    return (result.valid, result.seq, result.reason)


def test_an_edited_hash_is_named(demo):
    receipts = _finished_runs(3)
    _tamper("UPDATE runs_receipt SET hash = %s WHERE id = %s", ["f" * 64, receipts[2].id.hex])
    assert _verdict() == (False, 3, "hash does not match the body: the body was altered")


def test_swapped_hashes_and_an_edited_prev_hash_are_named(demo):
    receipts = _finished_runs(3)
    _tamper("UPDATE runs_receipt SET prev_hash = %s WHERE id = %s", ["e" * 64, receipts[1].id.hex])
    assert _verdict() == (False, 2, "prev_hash does not match the previous receipt's hash")
    _tamper("UPDATE runs_receipt SET prev_hash = %s WHERE id = %s", [receipts[1].prev_hash, receipts[1].id.hex])
    assert receipt_verify_chain().valid
    # hash is unique: swap through a placeholder
    _tamper("UPDATE runs_receipt SET hash = %s WHERE id = %s", ["0" * 63 + "1", receipts[1].id.hex])
    _tamper("UPDATE runs_receipt SET hash = %s WHERE id = %s", [receipts[1].hash, receipts[2].id.hex])
    _tamper("UPDATE runs_receipt SET hash = %s WHERE id = %s", [receipts[2].hash, receipts[1].id.hex])
    assert _verdict() == (False, 2, "hash does not match the body: the body was altered")


def test_a_missing_receipt_is_a_gap(demo):
    receipts = _finished_runs(3)
    _tamper("DELETE FROM runs_receipt WHERE id = %s", [receipts[1].id.hex])
    result = receipt_verify_chain()
    assert (result.valid, result.seq, result.receipt) == (False, 3, str(receipts[2].id))
    assert result.reason == "sequence gap: expected #2, found #3"


def test_reordered_receipts_break_the_links(demo):
    receipts = _finished_runs(3)
    _tamper("UPDATE runs_receipt SET seq = 99 WHERE id = %s", [receipts[1].id.hex])  # seq is unique
    _tamper("UPDATE runs_receipt SET seq = 2 WHERE id = %s", [receipts[2].id.hex])
    _tamper("UPDATE runs_receipt SET seq = 3 WHERE id = %s", [receipts[1].id.hex])
    result = receipt_verify_chain()
    assert (result.valid, result.seq, result.receipt) == (False, 2, str(receipts[2].id))
    assert result.reason == "prev_hash does not match the previous receipt's hash"


def test_a_duplicated_receipt_never_reaches_the_chain(demo):
    receipt = _finished_runs(1)[0]
    operator = User.objects.get(username="operator")
    other, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.", caller=operator)
    with pytest.raises(IntegrityError), transaction.atomic():  # the same seq twice: the database refuses
        _tamper("INSERT INTO runs_receipt (id, run_id, seq, prev_hash, hash, body, seal, created_at) "
                "SELECT %s, %s, seq, prev_hash, %s, body, seal, created_at FROM runs_receipt WHERE id = %s",
                [uuid.uuid4().hex, other.id.hex, "a" * 64, receipt.id.hex])


def test_a_receipt_moved_to_another_run_is_named(demo):
    receipts = _finished_runs(2)
    operator = User.objects.get(username="operator")
    other, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.", caller=operator)
    _tamper("UPDATE runs_receipt SET run_id = %s WHERE id = %s", [other.id.hex, receipts[1].id.hex])
    assert _verdict() == (False, 2, "body names another run")


def test_a_rewritten_body_with_rechained_hashes_is_still_checked_in_full(demo):
    """Rewriting a body and every hash after it makes a consistent chain; the body checks still run,
    because the sealer's mark no longer matches the receipt."""
    receipts = _finished_runs(3)
    value = json.loads(receipts[1].body)
    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", [json.dumps(value), receipts[1].id.hex])
    _rechain_from(2)
    assert _verdict() == (False, 2, "body is not in canonical form")

    value["run_id"] = str(receipts[0].run_id)  # canonical, but for another run
    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", [canonical(value), receipts[1].id.hex])
    _rechain_from(2)
    assert _verdict() == (False, 2, "body names another run")

    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", ["[1, 2]", receipts[1].id.hex])
    _rechain_from(2)
    assert _verdict() == (False, 2, "body is not in canonical form")
    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", ["not json", receipts[1].id.hex])
    _rechain_from(2)
    assert _verdict() == (False, 2, "body is not JSON")


def test_receipts_without_a_valid_mark_are_checked_in_full_and_pass_when_intact(demo):
    """Receipts sealed before marks existed, or under another SECRET_KEY, verify as before."""
    with override_settings(SECRET_KEY="an-older-key"):
        receipts = _finished_runs(2)
    _tamper("UPDATE runs_receipt SET seal = '' WHERE id = %s", [receipts[0].id.hex])
    assert all(r.seal for r in receipts[1:])
    result = receipt_verify_chain()
    assert (result.valid, result.checked) == (True, 2)
    # and without a mark, a non-canonical body rechained by a forger is found as before
    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", [json.dumps(json.loads(receipts[0].body)),
                                                                 receipts[0].id.hex])
    _rechain_from(1)
    assert _verdict() == (False, 1, "body is not in canonical form")


def test_the_sealer_marks_only_what_passes_the_body_checks(demo):
    receipt = _finished_runs(1)[0]
    assert len(receipt.seal) == 64
    assert receipt_seal_mark(hash_=receipt.hash, run_id=receipt.run_id, body=receipt.body) == receipt.seal
    assert receipt_seal_mark(hash_=receipt.hash, run_id=uuid.uuid4(), body=receipt.body) == ""
    assert receipt_seal_mark(hash_=receipt.hash, run_id=receipt.run_id,
                             body=json.dumps(json.loads(receipt.body))) == ""


# --- the checkpoint the admin pages start from --------------------------------------------------


def test_a_full_verification_leaves_a_checkpoint_and_the_page_check_starts_there(demo):
    receipts = _finished_runs(3)
    assert receipt_verify_since_checkpoint().valid  # no checkpoint yet: a full verification, which writes one
    assert list(ReceiptCheckpoint.objects.values_list("seq", "hash")) == [(3, receipts[2].hash)]
    receipts += _finished_runs(2)[3:]
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.checked, result.since) == (True, 5, 3)
    assert ReceiptCheckpoint.objects.count() == 1  # only a full verification moves it
    assert receipt_verify_chain(upto_seq=4).valid and ReceiptCheckpoint.objects.count() == 1
    assert receipt_verify_chain().valid
    assert list(ReceiptCheckpoint.objects.values_list("seq", flat=True)) == [5, 3]


def test_tampering_before_the_checkpoint_escapes_the_page_check_but_not_the_full_verification(demo, compliance):
    receipts = _finished_runs(3)
    assert receipt_verify_chain().valid
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [receipts[0].id.hex])
    assert receipt_verify_since_checkpoint().valid  # the trade made for page loads
    assert _verdict() == (False, 1, "hash does not match the body: the body was altered")
    with pytest.raises(CommandError, match="#1"):
        call_command("verify_receipts")
    assert compliance.get(f"/api/v1/receipts/{receipts[2].id}/verify/").json()["valid"] is False
    assert list(ReceiptCheckpoint.objects.values_list("seq", flat=True)) == [3]  # a failed verification writes none


def test_the_page_check_finds_tampering_after_the_checkpoint_and_a_rewritten_checkpoint(demo):
    receipts = _finished_runs(2)
    assert receipt_verify_chain().valid
    receipts += _finished_runs(2)[2:]
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [receipts[3].id.hex])
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.seq, result.receipt) == (False, 4, str(receipts[3].id))
    _tamper("UPDATE runs_receipt SET body = %s WHERE id = %s", [receipts[3].body, receipts[3].id.hex])
    assert receipt_verify_since_checkpoint().valid
    # a forger rewrites receipt #1 and every hash after it: the checkpoint's receipt no longer carries its hash
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [receipts[0].id.hex])
    _rechain_from(1)
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.seq, result.receipt) == (False, 2, str(receipts[1].id))
    assert result.reason == "hash differs from the one verified at the checkpoint: the chain was rewritten"
