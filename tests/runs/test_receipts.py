"""Receipts (evidence format v2): canonical, signed, chained, bound to the run's trace and approvals,
append-only in the database. The insider's tampering, kind by kind, is in tests/evidence/test_tamper.py."""

import base64
import json
import os
import stat

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import CommandError, call_command
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.test import override_settings

from runs import append_only, services, signing
from runs.models import ApprovalDecision, ApprovalRequest, Receipt, ReceiptCheckpoint, Run, RunEvent
from runs.receipts import GENESIS
from runs.verification import receipt_verify_chain, receipt_verify_since_checkpoint
from runs.verification_receipt import receipt_verify
from runs.witness import checkpoint_head, witness_publish
from warrant_verify.jcs import canonicalize
from warrant_verify.keys import key_id, verify_signature
from warrant_verify.messages import receipt_hash, receipt_message, trace_head

pytestmark = pytest.mark.django_db


def _tamper(sql: str, params: list) -> None:
    """What someone with raw database access could do: switch the append-only triggers off (on
    PostgreSQL a superuser's session setting; on SQLite drop them), write, and put them back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(sql, params)
            cursor.execute("SET LOCAL session_replication_role = origin")
        else:
            append_only.sqlite_drop(cursor)
            cursor.execute(sql, params)
            append_only.sqlite_create(cursor)


def _finished_runs(count: int) -> list[Receipt]:
    operator = User.objects.get(username="operator")
    for i in range(count):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=f"List all accounts. ({i})", caller=operator)
        services.run_advance(run_id=run.id)
    return list(Receipt.objects.order_by("seq"))


def test_the_chain_links_signed_canonical_v2_bodies(demo):
    receipts = _finished_runs(3)
    keys = signing.key_set()
    assert [r.seq for r in receipts] == [1, 2, 3]
    for prev, receipt in zip([None, *receipts], receipts):
        assert receipt.prev_hash == (prev.hash if prev else GENESIS)
        assert receipt.hash == receipt_hash(receipt.prev_hash, receipt.body)
        assert canonicalize(json.loads(receipt.body)).decode() == receipt.body
        message = receipt_message(seq=receipt.seq, prev_hash=receipt.prev_hash, hash=receipt.hash,
                                  key_id=receipt.key_id, run_id=str(receipt.run_id))
        assert receipt.key_id == signing.signing_key()[0]
        assert verify_signature(keys, receipt.key_id, message, receipt.signature) == ""
    body = json.loads(receipts[0].body)
    assert body["v"] == 2
    for key in ("run_id", "agent", "caller", "status", "input_sha256", "output_sha256", "policy_snapshot_sha256",
                "policies_fired", "skills_used", "model_calls", "tool_calls", "approvals", "trace", "totals",
                "started_at", "finished_at"):
        assert key in body
    call_command("verify_receipts")


def test_the_receipt_seals_the_head_of_the_runs_hash_chained_trace(demo):
    receipt = _finished_runs(1)[0]
    events = list(RunEvent.objects.filter(run=receipt.run).order_by("seq").values_list("seq", "step", "kind", "data",
                                                                                          "hash"))
    assert [e[0] for e in events] == list(range(1, len(events) + 1))
    count, head = trace_head([e[:4] for e in events])
    assert json.loads(receipt.body)["trace"] == {"events": count, "head": head} and head == events[-1][4]


def test_approvals_are_sealed_with_decider_how_they_logged_in_and_reason(demo):
    operator, approver = User.objects.get(username="operator"), User.objects.get(username="approver")
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.", caller=operator)
    services.run_advance(run_id=run.id)
    pending = run.approvals.get(status="pending")
    services.approval_decide(approval_id=pending.id, user=approver, approve=True, reason="customer asked",
                             via="session")
    services.run_advance(run_id=run.id)
    body = json.loads(Receipt.objects.get(run_id=run.id).body)
    (approval,) = body["approvals"]
    assert approval["decided_by"] == "approver" and approval["reason"] == "customer asked"
    assert approval["decided_via"] == "session" and approval["decided_at"].endswith("Z")
    assert receipt_verify_chain().valid


def test_a_run_that_never_parked_seals_no_approvals_by_asking_the_database(demo):
    receipt = _finished_runs(1)[0]
    run = Run.objects.get(id=receipt.run_id)
    assert run.state["parks"] == 0 and json.loads(receipt.body)["approvals"] == []


def test_the_orm_refuses_to_change_evidence(demo):
    receipt = _finished_runs(1)[0]
    receipt.body = "{}"
    with pytest.raises(ValidationError):
        receipt.save()
    with pytest.raises(ValidationError):
        receipt.delete()
    with pytest.raises(ValidationError):
        Receipt.objects.filter(pk=receipt.pk).update(hash="0" * 64)
    with pytest.raises(ValidationError):
        RunEvent.objects.all().delete()
    with pytest.raises(ValidationError):
        ReceiptCheckpoint.objects.all().delete()


@pytest.mark.parametrize("table", append_only.TABLES)
@pytest.mark.parametrize("statement", ["UPDATE {table} SET id = id", "DELETE FROM {table}"])
def test_the_database_refuses_raw_updates_and_deletes(demo, table, statement):
    run = Run.objects.get(id=_finished_runs(1)[0].run_id)
    witness_publish(force=True)  # a checkpoint row to refuse changing
    request = ApprovalRequest.objects.create(  # and a decision
        run=run, step=1, call_id="call_1_1", tool="send_email", arguments={}, arguments_sha256="0" * 64,
        approver_role=Group.objects.get(name="secops"), expires_at=run.created_at)
    ApprovalDecision.objects.create(approval=request, user=User.objects.get(username="approver"),
                                    username="approver", role="secops", decision="approved", via="session")
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement.format(table=table))


def test_one_changed_byte_is_detected_and_named_with_its_check(demo):
    receipts = _finished_runs(3)
    tampered = receipts[1]
    _tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [tampered.id.hex])
    with pytest.raises(CommandError) as error:
        call_command("verify_receipts")
    assert error.value.returncode == 1
    result = receipt_verify_chain()
    assert (result.valid, result.seq, result.receipt, result.check) == (False, 2, str(tampered.id), "chain")
    assert "the body or a hash was edited" in result.reason


def test_the_api_verify_says_which_check_failed(demo, compliance):
    receipts = _finished_runs(2)
    ok = compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()
    assert ok["valid"] is True and ok["failures"] == [] and ok["check"] == ""
    _tamper("UPDATE runs_run SET output = 'nothing happened' WHERE id = %s", [receipts[1].run_id.hex])
    verdict = compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "run" and verdict["receipt"] == str(receipts[1].id)
    assert verdict["reason"] == "the run's output differs from the one sealed"


def test_someone_elses_failure_is_reported_without_naming_it(demo, operator, second_operator):
    mine = _finished_runs(1)[0]
    other, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                  caller=User.objects.get(username="operator2"))
    services.run_advance(run_id=other.id)
    _tamper("DELETE FROM runs_receipt WHERE run_id = %s", [other.id.hex])
    verdict = operator.get(f"/api/v1/receipts/{mine.id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "completeness"
    assert verdict["failures"] == [{"check": "completeness", "record": None, "seq": None, "receipt": None,
                                    "reason": "a record you may not read failed this check"}]
    assert str(other.id) not in json.dumps(verdict)


def test_the_key_set_is_published_to_any_logged_in_user(demo, outsider):
    _finished_runs(1)
    document = outsider.get("/api/v1/receipts/keys/").json()
    (key,) = document["keys"]
    assert key["key_id"] == signing.signing_key()[0] and key["status"] == "active" and key["algorithm"] == "Ed25519"
    assert len(base64.b64decode(key["public_key"])) == 32


# --- the signing key -------------------------------------------------------------------------------------


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
        _finished_runs(2)
        new_key = tmp_path / "new.pem"
        call_command("receipt_keys", "rotate", "--out", str(new_key))
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=str(new_key)):
            new_id = signing.signing_key()[0]
            receipts = _finished_runs(2)
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
        _finished_runs(2)
        call_command("receipt_keys", "rotate", "--out", str(new_key))
    return str(old_key), str(new_key)


def test_a_receipt_forged_with_the_retired_key_past_its_bound_is_caught(demo, tmp_path):
    with override_settings(WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_key, new_key = _rotated(tmp_path)
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=new_key):
            _finished_runs(1)
            old = signing.parse_private_key((tmp_path / "old.pem").read_bytes(), origin="the stolen key")
            old_id = key_id(old.public_key())
            # Whoever kept the old private key re-signs receipt #3 as theirs (a DBA swaps the columns).
            forged = Receipt.objects.get(seq=3)
            message = receipt_message(seq=3, prev_hash=forged.prev_hash, hash=forged.hash, key_id=old_id,
                                      run_id=str(forged.run_id))
            signature = base64.b64encode(old.sign(message)).decode()
            _tamper("UPDATE runs_receipt SET key_id = %s, signature = %s WHERE seq = 3", [old_id, signature])
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
        _finished_runs(1)
        call_command("receipt_keys", "rotate")
        new_id = signing.signing_key()[0]
        receipts = _finished_runs(1)
        assert new_id != old_id and [r.key_id for r in receipts] == [old_id, new_id]
        assert [(k["key_id"], k["status"], k.get("retired_after_seq")) for k in signing.key_set_document()["keys"]] \
            == [(new_id, "active", None), (old_id, "retired", 1)]
        assert receipt_verify_chain().valid


def test_rotating_again_keeps_the_first_bound(demo, tmp_path):
    with override_settings(WARRANT_RECEIPT_PUBLIC_KEYS_FILE=str(tmp_path / "keys.json")):
        old_key, new_key = _rotated(tmp_path)
        first = json.loads((tmp_path / "keys.json").read_text())["keys"]
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=new_key):
            _finished_runs(1)
        with override_settings(WARRANT_RECEIPT_SIGNING_KEY_FILE=old_key):  # the old key rotated once more by mistake
            call_command("receipt_keys", "rotate", "--out", str(tmp_path / "again.pem"))
            assert json.loads((tmp_path / "keys.json").read_text())["keys"] == first


# --- the page check ------------------------------------------------------------------------------------


def test_the_page_check_starts_from_the_newest_signed_checkpoint_and_checks_signatures_after_it(demo):
    receipts = _finished_runs(3)
    witness_publish(force=True)
    receipts = _finished_runs(2)
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.checked, result.since) == (True, 5, 3)
    _tamper("UPDATE runs_receipt SET signature = %s WHERE id = %s", [receipts[0].signature, receipts[4].id.hex])
    result = receipt_verify_since_checkpoint()
    assert (result.valid, result.seq, result.check) == (False, 5, "signature")


def test_the_page_check_catches_a_chain_rewritten_under_its_checkpoint(demo):
    receipts = _finished_runs(3)
    witness_publish(force=True)
    body = receipts[0].body.replace('"succeeded"', '"failed"')
    prev = GENESIS
    for receipt in receipts:  # a forger rewrites #1 and rechains everything after it
        text = body if receipt.seq == 1 else receipt.body
        new = receipt_hash(prev, text)
        _tamper("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s WHERE id = %s",
                [text, prev, new, receipt.id.hex])
        prev = new
    result = receipt_verify_since_checkpoint()
    assert not result.valid and result.check in ("checkpoints", "signature")


# --- one receipt, verified by its neighbourhood ------------------------------------------------------------


def _checkpoints_at(*seqs: int) -> None:
    for seq in seqs:
        checkpoint_head((seq, Receipt.objects.get(seq=seq).hash))


def test_one_receipt_is_walked_to_its_nearest_checkpoint_not_from_the_first(demo, compliance):
    receipts = _finished_runs(12)
    _checkpoints_at(4, 10)
    assert receipt_verify_chain().checked == 12  # the whole walk, as the endpoint did before
    verdict = compliance.get(f"/api/v1/receipts/{receipts[8].id}/verify/").json()
    assert verdict["valid"] is True, verdict
    assert (verdict["walked"], verdict["anchor"]) == (3, {"seq": 10, "where": "database"})  # #8 (its link), #9, #10
    first = compliance.get(f"/api/v1/receipts/{receipts[0].id}/verify/").json()
    assert (first["valid"], first["walked"], first["anchor"]) == (True, 4, {"seq": 4, "where": "database"})


def test_a_receipt_after_the_last_checkpoint_is_valid_and_not_yet_anchored(demo, compliance):
    receipts = _finished_runs(12)
    _checkpoints_at(4, 10)
    newest = compliance.get(f"/api/v1/receipts/{receipts[-1].id}/verify/").json()
    assert (newest["valid"], newest["walked"], newest["anchor"]) == (True, 2, None), newest
    assert "not yet anchored" in newest["reason"]


def test_a_receipt_tampered_between_the_target_and_its_anchor_is_caught(demo, compliance):
    receipts = _finished_runs(12)
    _checkpoints_at(4, 10)
    ninth = receipts[8]
    body = ninth.body.replace('"succeeded"', '"failed"')
    _tamper("UPDATE runs_receipt SET body = %s, hash = %s WHERE id = %s",
            [body, receipt_hash(ninth.prev_hash, body), ninth.id.hex])
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and verdict["seq"] == 9 and verdict["check"] == "signature", verdict
    assert verdict["anchor"] is None  # checkpoint #10 no longer matches what #9 chains to
    assert compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()["anchor"] == {
        "seq": 4, "where": "database"}  # a receipt anchored before the damage is still proven


def test_the_key_holder_rechaining_between_the_target_and_its_anchor_is_caught_by_the_checkpoint(demo, compliance):
    receipts = _finished_runs(12)
    _checkpoints_at(4, 10)
    prev = receipts[7].hash
    for receipt in receipts[8:]:  # #9 rewritten, #9 to #12 rechained and re-signed with the key
        text = receipt.body.replace('"succeeded"', '"failed"') if receipt.seq == 9 else receipt.body
        new = receipt_hash(prev, text)
        signature = signing.sign(receipt_message(seq=receipt.seq, prev_hash=prev, hash=new, key_id=receipt.key_id,
                                                 run_id=str(receipt.run_id)))
        _tamper("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s, signature = %s WHERE id = %s",
                [text, prev, new, signature, receipt.id.hex])
        prev = new
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and "checkpoints" in {f["check"] for f in verdict["failures"]}, verdict


def test_a_forged_checkpoint_inside_the_walk_is_reported_and_anchors_nothing(demo, compliance):
    receipts = _finished_runs(12)
    _checkpoints_at(4, 10)
    real = ReceiptCheckpoint.objects.get(seq=10)
    ReceiptCheckpoint.objects.create(seq=9, head=receipts[8].hash, at=real.at, key_id=real.key_id,
                                     signature=real.signature)  # a DBA's, without the key: #10's signature
    verdict = compliance.get(f"/api/v1/receipts/{receipts[7].id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "checkpoints", verdict
    assert (verdict["walked"], verdict["anchor"]) == (4, {"seq": 10, "where": "database"})  # #7 to #10
