"""Receipts verified from signed checkpoints: the receipt list's page check starts at the newest one,
and one receipt is walked only to its nearest checkpoint, catching tampering and forgeries on the way."""

import pytest

from runs import signing
from runs.models import Receipt, ReceiptCheckpoint
from runs.receipts import GENESIS
from runs.verification import receipt_verify_chain, receipt_verify_since_checkpoint
from runs.witness import checkpoint_head, witness_publish
from tests.runs.receipt_helpers import finished_runs, tamper
from warrant_verify.messages import receipt_hash, receipt_message

pytestmark = pytest.mark.django_db


# --- the page check ------------------------------------------------------------------------------------


def test_the_page_check_starts_from_the_newest_signed_checkpoint_and_checks_signatures_after_it(demo):
    receipts = finished_runs(3)
    witness_publish(force=True)
    receipts = finished_runs(2)
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.checked, result.since) == (True, 5, 3)
    tamper("UPDATE runs_receipt SET signature = %s WHERE id = %s", [receipts[0].signature, receipts[4].id.hex])
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.seq, result.check) == (False, 5, "signature")


def test_the_page_check_catches_a_chain_rewritten_under_its_checkpoint(demo):
    receipts = finished_runs(3)
    witness_publish(force=True)
    body = receipts[0].body.replace('"succeeded"', '"failed"')
    prev = GENESIS
    for receipt in receipts:  # a forger rewrites #1 and rechains everything after it
        text = body if receipt.seq == 1 else receipt.body
        new = receipt_hash(prev, text)
        tamper("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s WHERE id = %s",
                [text, prev, new, receipt.id.hex])
        prev = new
    result = receipt_verify_since_checkpoint()
    assert not result.valid and result.check in ("checkpoints", "signature")


# --- one receipt, verified by its neighbourhood ------------------------------------------------------------


def _checkpoints_at(*seqs: int) -> None:
    for seq in seqs:
        checkpoint_head((seq, Receipt.objects.get(seq=seq).hash))


def test_one_receipt_is_walked_to_its_nearest_checkpoint_not_from_the_first(demo, compliance):
    receipts = finished_runs(12)
    _checkpoints_at(4, 10)
    assert receipt_verify_chain().checked == 12  # the whole walk, as the endpoint did before
    verdict = compliance.get(f"/api/v1/receipts/{receipts[8].id}/verify/").json()
    assert verdict["valid"] is True, verdict
    assert (verdict["walked"], verdict["anchor"]) == (3, {"seq": 10, "where": "database"})  # #8 (its link), #9, #10
    first = compliance.get(f"/api/v1/receipts/{receipts[0].id}/verify/").json()
    assert (first["valid"], first["walked"], first["anchor"]) == (True, 4, {"seq": 4, "where": "database"})


def test_a_receipt_after_the_last_checkpoint_is_valid_and_not_yet_anchored(demo, compliance):
    receipts = finished_runs(12)
    _checkpoints_at(4, 10)
    newest = compliance.get(f"/api/v1/receipts/{receipts[-1].id}/verify/").json()
    assert (newest["valid"], newest["walked"], newest["anchor"]) == (True, 2, None), newest
    assert "not yet anchored" in newest["reason"]


def test_a_receipt_tampered_between_the_target_and_its_anchor_is_caught(demo, compliance):
    receipts = finished_runs(12)
    _checkpoints_at(4, 10)
    ninth = receipts[8]
    body = ninth.body.replace('"succeeded"', '"failed"')
    tamper("UPDATE runs_receipt SET body = %s, hash = %s WHERE id = %s",
            [body, receipt_hash(ninth.prev_hash, body), ninth.id.hex])
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and verdict["seq"] == 9 and verdict["check"] == "signature", verdict
    assert verdict["anchor"] is None  # checkpoint #10 no longer matches what #9 chains to
    assert compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()["anchor"] == {
        "seq": 4, "where": "database"}  # a receipt anchored before the damage is still proven


def test_the_key_holder_rechaining_between_the_target_and_its_anchor_is_caught_by_the_checkpoint(demo, compliance):
    receipts = finished_runs(12)
    _checkpoints_at(4, 10)
    prev = receipts[7].hash
    for receipt in receipts[8:]:  # #9 rewritten, #9 to #12 rechained and re-signed with the key
        text = receipt.body.replace('"succeeded"', '"failed"') if receipt.seq == 9 else receipt.body
        new = receipt_hash(prev, text)
        signature = signing.sign(receipt_message(seq=receipt.seq, prev_hash=prev, hash=new, key_id=receipt.key_id,
                                                 run_id=str(receipt.run_id)))
        tamper("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s, signature = %s WHERE id = %s",
                [text, prev, new, signature, receipt.id.hex])
        prev = new
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and "checkpoints" in {f["check"] for f in verdict["failures"]}, verdict


def test_a_forged_checkpoint_inside_the_walk_is_reported_and_anchors_nothing(demo, compliance):
    receipts = finished_runs(12)
    _checkpoints_at(4, 10)
    real = ReceiptCheckpoint.objects.get(seq=10)
    ReceiptCheckpoint.objects.create(seq=9, head=receipts[8].hash, at=real.at, key_id=real.key_id,
                                     signature=real.signature)  # a DBA's, without the key: #10's signature
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "checkpoints", verdict
    assert (verdict["walked"], verdict["anchor"]) == (4, {"seq": 10, "where": "database"})  # #7 to #10
