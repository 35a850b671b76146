"""Receipts from before signing (v1: no "v" in the body, no key id, no signature) at the start of
the chain verify as legacy, hash-chained receipts, and say so; the same unsigned shape after a
signed receipt is refused (signing was on, so someone without the key made it).

The legacy prefix is built the way an upgrade leaves it: the first receipts rewritten into the v1
shape (as they were sealed then, the database's checkpoints of them gone with the old format),
then the next seal signs as usual and chains onto them.
"""

import io
import json

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command

from runs import services, signing
from runs.evidence import evidence_bundle_write
from runs.models import Receipt, ReceiptCheckpoint
from runs.verification import receipt_own_problems, receipt_verify_chain
from runs.verification_receipt import receipt_verify
from tests.evidence.test_tamper import _uid, attack
from warrant_verify.archive import read_bundle
from warrant_verify.bundle import verify_bundle
from warrant_verify.jcs import canonicalize
from warrant_verify.legacy import AFTER_SIGNING, v1_approvals
from warrant_verify.messages import GENESIS, receipt_hash

pytestmark = pytest.mark.django_db(transaction=True)


def _seal(text: str) -> Receipt:
    run, _ = services.run_start(agent_slug="crm-assistant", input_text=text,
                                caller=User.objects.get(username="operator"))
    if not django_settings.CELERY_TASK_ALWAYS_EAGER:  # tests/services on PostgreSQL: no worker, advance here
        services.run_advance(run_id=run.id)
    return Receipt.objects.get(run_id=run.id)


def _as_v1(body: str) -> str:
    """A v2 body cut to what a v1 receipt sealed: no "v", no trace or outcome, approvals without how or why."""
    value = json.loads(body)
    for name in ("v", "trace", "outcome", "refused", "origin"):
        value.pop(name, None)
    value["approvals"] = v1_approvals(value["approvals"])
    return canonicalize(value).decode()


def _unsign(from_seq: int, upto_seq: int, *, drop_checkpoints: bool = True) -> None:
    """Receipts from_seq..upto_seq rewritten into the unsigned v1 shape and rechained (and the
    database's checkpoints deleted, as the upgrade did and as a DBA may)."""
    prev = Receipt.objects.get(seq=from_seq - 1).hash if from_seq > 1 else GENESIS
    statements = []
    for receipt in Receipt.objects.filter(seq__gte=from_seq, seq__lte=upto_seq).order_by("seq"):
        body = _as_v1(receipt.body)
        new = receipt_hash(prev, body)
        statements.append(("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s, key_id = '', signature = '' "
                           "WHERE id = %s", [body, prev, new, _uid(receipt.id)]))
        prev = new
    attack(*statements, *([("DELETE FROM runs_receiptcheckpoint", [])] if drop_checkpoints else []))


@pytest.fixture
def upgraded(demo, settings, tmp_path):
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0
    settings.WARRANT_WITNESS_FILE = ""  # no witness before signing (its checkpoints came with signing)
    _seal("List all accounts. (1)")
    _seal("List all accounts. (2)")
    _unsign(1, 2)  # sealed before signing existed
    assert ReceiptCheckpoint.objects.count() == 0
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    third = _seal("List all accounts. (3)")  # after the upgrade: signed, chained onto the legacy pair
    assert third.seq == 3 and third.signature and third.prev_hash == Receipt.objects.get(seq=2).hash
    _seal("List all accounts. (4)")
    return tmp_path


def test_legacy_receipts_before_the_first_signed_one_verify_and_are_stated(upgraded):
    checked = receipt_verify_chain()
    assert checked.valid, checked.failures
    assert "2 legacy receipts (seq 1-2) from before signing: hash-chained, unsigned, pinned by the first signed" \
        in checked.reason
    first = Receipt.objects.get(seq=1)
    assert receipt_verify(receipt=first).valid and receipt_own_problems(first) == []
    call_command("verify_receipts", stdout=io.StringIO())

    evidence_bundle_write(out_dir=upgraded / "b", requested_by=User.objects.get(username="compliance"))
    report = verify_bundle(read_bundle(upgraded / "b"), trusted=signing.key_set())
    assert report.failures == []
    assert any(note.startswith("2 legacy receipts (seq 1-2)") for note in report.notes), report.notes


def test_an_unsigned_receipt_after_a_signed_one_is_refused(upgraded):
    _unsign(4, 4, drop_checkpoints=False)  # someone without the key passes #4 off as from before signing
    checked = receipt_verify_chain()
    assert (4, AFTER_SIGNING) in [(p.seq, p.reason) for p in checked.failures], checked.failures
    fourth = Receipt.objects.get(seq=4)
    assert any("signed by unknown key" in p for p in receipt_own_problems(fourth))
    assert not receipt_verify(receipt=fourth).valid


def test_every_signed_receipt_unsigned_is_refused_past_the_witness_s_first_checkpoint(upgraded, tmp_path):
    """No signed receipt is left to say signing had begun, and the database's checkpoints are gone:
    the witness's checkpoint at #3 (signed, of the head) still says #4 came after signing began."""
    _unsign(3, 4)
    checked = receipt_verify_chain()
    assert (4, AFTER_SIGNING) in [(p.seq, p.reason) for p in checked.failures], checked.failures
    assert not receipt_verify(receipt=Receipt.objects.get(seq=4)).valid
    evidence_bundle_write(out_dir=tmp_path / "b", requested_by=User.objects.get(username="compliance"))
    report = verify_bundle(read_bundle(tmp_path / "b"), trusted=signing.key_set(),
                           witness=(tmp_path / "witness.jsonl").read_bytes(), witness_name="witness.jsonl")
    assert f"receipts.jsonl: seq 4: {AFTER_SIGNING}" in [str(f) for f in report.failures], report.failures


def test_a_legacy_receipt_edited_fails_on_its_hash(upgraded):
    first = Receipt.objects.get(seq=1)
    attack(("UPDATE runs_receipt SET body = %s WHERE id = %s",
            [first.body.replace('"succeeded"', '"failed"'), _uid(first.id)]))
    checked = receipt_verify_chain()
    assert not checked.valid
    assert any(p.seq == 1 and "hash is not sha256" in p.reason for p in checked.failures), checked.failures
