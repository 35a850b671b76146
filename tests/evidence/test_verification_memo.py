"""What a verification remembers of the receipts it found whole (runs.verification_memo): the next
verification in the process holds them to their runs without reading their bodies again, and
anything changed since is still caught and named."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs import signing, verification_memo
from runs.models import Receipt
from runs.verification import _receipt_rows, receipt_verify_chain
from tests.evidence.test_tamper import _receipt, _uid, attack, history  # noqa: F401 (history is a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _records() -> list[dict]:
    return [record for chunk in _receipt_rows(from_seq=1, upto_seq=None) for record in chunk]


@pytest.mark.usefixtures("history")
def test_a_verified_chain_is_vouched_for_by_the_key_that_signed_it():
    records = _records()
    assert len(records) == Receipt.objects.count() == 4
    raw = verification_memo.raw_keys(signing.verifying_keys())
    assert sorted(verification_memo.vouched(records, raw)) == [0, 1, 2, 3]  # history verified them
    assert verification_memo.vouched(records, {}) == {}  # a key set without their key vouches for none
    edited = [dict(records[1], body=records[1]["body"] + " ")]
    assert verification_memo.vouched(edited, raw) == {}  # the body no longer hashes to the hash
    result = receipt_verify_chain()
    assert result.valid and result.checked == 4, result


@pytest.mark.usefixtures("history")
def test_a_signature_swapped_after_a_verification_is_caught():
    """Every column the signature covers is unchanged; only the signature is another receipt's."""
    attack(("UPDATE runs_receipt SET signature = %s WHERE id = %s", [_receipt(2).signature, _uid(_receipt(3).id)]))
    result = receipt_verify_chain()
    assert not result.valid and (result.check, result.seq) == ("signature", 3), result
    errors = io.StringIO()
    with pytest.raises(CommandError):
        call_command("verify_receipts", stderr=errors)
    assert "signature does not verify" in errors.getvalue()
