"""The receipts' signing key: where it comes from (a file, the environment, a demo key made once), that
production refuses to start without one, and rotation: new receipts signed by the new key, the retired
key bounded at the head when it was retired, and whatever it signs past its bound refused."""

import base64
import json
import os
import stat

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test import override_settings

from runs import signing
from runs.models import Receipt
from runs.verification import receipt_verify_chain
from runs.verification_receipt import receipt_verify
from runs.witness import checkpoint_head
from tests.runs.receipt_helpers import finished_runs, tamper
from warrant_verify.keys import key_id
from warrant_verify.messages import receipt_message

pytestmark = pytest.mark.django_db


def test_debug_without_a_key_makes_a_private_demo_key_once(tmp_path, caplog):
    with override_settings(DATA_DIR=tmp_path, WARRANT_RECEIPT_SIGNING_KEY_FILE="", WARRANT_RECEIPT_SIGNING_KEY="",
                           WARRANT_RECEIPT_DEMO_KEY=True):
        first = signing.signing_key()[0]
        path = tmp_path / signing.DEMO_KEY_NAME
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert "DEMO key" in caplog.text and str(path) in caplog.text
        signing.reload()
        assert signing.signing_key()[0] == first  # made once, then read


def test_production_without_a_key_refuses_to_start(tmp_path):
    from runs.checks import receipts_can_be_signed

    with override_settings(DATA_DIR=tmp_path, WARRANT_RECEIPT_SIGNING_KEY_FILE="", WARRANT_RECEIPT_SIGNING_KEY="",
                           WARRANT_RECEIPT_DEMO_KEY=False):
        with pytest.raises(ImproperlyConfigured, match="WARRANT_RECEIPT_SIGNING_KEY_FILE"):
            signing.signing_key()
        (error,) = receipts_can_be_signed(None)
        assert error.id == "governance.E010"
    assert not (tmp_path / signing.DEMO_KEY_NAME).exists()


def test_a_key_from_the_environment_as_base64_raw_bytes(tmp_path):
    raw = base64.b64encode(os.urandom(32)).decode()
    with override_settings(WARRANT_RECEIPT_SIGNING_KEY=raw, WARRANT_RECEIPT_SIGNING_KEY_FILE=""):
        key_id, key = signing.signing_key()
        assert signing.signing_origin() == "WARRANT_RECEIPT_SIGNING_KEY"
    with override_settings(WARRANT_RECEIPT_SIGNING_KEY="bm90IGEga2V5", WARRANT_RECEIPT_SIGNING_KEY_FILE=""):
        with pytest.raises(ImproperlyConfigured, match="32"):
            signing.signing_key()


def test_rotation_signs_new_receipts_with_the_new_key_and_old_ones_still_verify(demo, tmp_path):
    old_key = tmp_path / "old.pem"
    call_command("receipt_keys", "generate", "--out", str(old_key))
    public_file = tmp_path / "keys.json"
    with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=str(old_key), WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(public_file)):
        old_id = signing.signing_key()[0]
        finished_runs(2)
        new_key = tmp_path / "new.pem"
        call_command("receipt_keys", "rotate", "--out", str(new_key))
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=str(new_key)):
            new_id = signing.signing_key()[0]
            receipts = finished_runs(2)
            assert [r.key_id for r in receipts] == [old_id, old_id, new_id, new_id]
            statuses = {k["key_id"]: k["status"] for k in signing.key_set_document()["keys"]}
            assert statuses == {new_id: "active", old_id: "retired"}
            assert receipt_verify_chain().valid
            # The bound is the head when the key was retired, in the file and in the published key set.
            (entry,) = json.loads(public_file.read_text())["keys"]
            assert (entry["key_id"], entry["status"], entry["retired_after_seq"]) == (old_id, "retired", 2)
            assert entry["retired_at"].endswith("Z") and entry in signing.key_set_document()["keys"]
            public_file.write_text(json.dumps({"keys": []}))  # the retired key withdrawn: its receipts fail
            result = receipt_verify_chain()
            assert not result.valid and {p.check for p in result.failures} == {"signature"}
            assert [p.seq for p in result.failures] == [1, 2]


def _rotated(tmp_path) -> tuple[str, str]:
    """Two receipts by an old key, rotated to a new one (the old one's files kept): (old key file, new key file)."""
    old_key, new_key = tmp_path / "old.pem", tmp_path / "new.pem"
    call_command("receipt_keys", "generate", "--out", str(old_key))
    with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=str(old_key)):
        finished_runs(2)
        call_command("receipt_keys", "rotate", "--out", str(new_key))
    return str(old_key), str(new_key)


def test_a_receipt_forged_with_the_retired_key_past_its_bound_is_caught(demo, tmp_path):
    with override_settings(WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_key, new_key = _rotated(tmp_path)
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=new_key):
            finished_runs(1)
            old = signing.parse_private_key((tmp_path / "old.pem").read_bytes(), origin="the stolen key")
            old_id = key_id(old.public_key())
            # Whoever kept the old private key re-signs receipt #3 as theirs (a DBA swaps the columns).
            forged = Receipt.objects.get(seq=3)
            message = receipt_message(seq=3, prev_hash=forged.prev_hash, hash=forged.hash, key_id=old_id,
                                      run_id=str(forged.run_id))
            signature = base64.b64encode(old.sign(message)).decode()
            tamper("UPDATE runs_receipt SET key_id = %s, signature = %s WHERE seq = 3", [old_id, signature])
            result = receipt_verify_chain()
            assert not result.valid and [(p.check, p.seq, p.reason) for p in result.failures] == [
                ("signature", 3, f"signed by key {old_id} retired after #2")]
            with pytest.raises(CommandError):
                call_command("verify_receipts")
            assert receipt_verify(receipt=Receipt.objects.get(seq=3)).reason.endswith("retired after #2")


def test_a_process_still_holding_the_retired_key_signs_nothing(demo, tmp_path):
    with override_settings(WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_key, _new_key = _rotated(tmp_path)
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=old_key):  # not restarted with the new key
            old_id = signing.signing_key()[0]
            with pytest.raises(signing.SigningKeyRetired, match="retired"):
                signing.sign(b"anything")
            with pytest.raises(signing.SigningKeyRetired):
                checkpoint_head()
            document = signing.key_set_document()  # it lists its own key as what it now is
            assert [(k["key_id"], k["status"], k["retired_after_seq"]) for k in document["keys"]] == [
                (old_id, "retired", 2)]


def test_rotating_the_demo_key_bounds_it_and_signing_moves_to_the_new_one(demo, tmp_path):
    with override_settings(DATA_DIR=tmp_path, WARRANT_RECEIPT_SIGNING_KEY_FILE="", WARRANT_RECEIPT_SIGNING_KEY="",
                           WARRANT_RECEIPT_DEMO_KEY=True, WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_id = signing.signing_key()[0]
        finished_runs(1)
        call_command("receipt_keys", "rotate")
        new_id = signing.signing_key()[0]
        receipts = finished_runs(1)
        assert new_id != old_id and [r.key_id for r in receipts] == [old_id, new_id]
        assert [(k["key_id"], k["status"], k.get("retired_after_seq")) for k in signing.key_set_document()["keys"]] \
            == [(new_id, "active", None), (old_id, "retired", 1)]
        assert receipt_verify_chain().valid


def test_rotating_again_keeps_the_first_bound(demo, tmp_path):
    with override_settings(WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_key, new_key = _rotated(tmp_path)
        first = json.loads((tmp_path / "keys.json").read_text())["keys"]
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=new_key):
            finished_runs(1)
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=old_key):  # the old key rotated once more by mistake
            call_command("receipt_keys", "rotate", "--out", str(tmp_path / "again.pem"))
            assert json.loads((tmp_path / "keys.json").read_text())["keys"] == first
