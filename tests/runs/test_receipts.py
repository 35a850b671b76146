"""Receipts (evidence format v2): canonical, signed, chained, bound to the run's trace and approvals,
append-only in the database. The insider's tampering, kind by kind, is in tests/evidence/test_tamper.py;
the signing key and its rotation in test_receipts_keys.py; checkpoints in test_receipts_checkpoints.py."""

import base64
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import DatabaseError, IntegrityError, connection, transaction

from runs import append_only, services, signing
from runs.models import ApprovalDecision, ApprovalRequest, Receipt, ReceiptCheckpoint, Run, RunEvent
from runs.receipts import GENESIS
from runs.verification import receipt_verify_chain
from runs.witness import witness_publish
from tests.runs.receipt_helpers import finished_runs, tamper
from warrant_verify.jcs import canonicalize
from warrant_verify.keys import verify_signature
from warrant_verify.messages import receipt_hash, receipt_message, trace_head

pytestmark = pytest.mark.django_db


def test_the_chain_links_signed_canonical_v2_bodies(demo):
    receipts = finished_runs(3)
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
    receipt = finished_runs(1)[0]
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
    receipt = finished_runs(1)[0]
    run = Run.objects.get(id=receipt.run_id)
    assert run.state["parks"] == 0 and json.loads(receipt.body)["approvals"] == []


def test_the_orm_refuses_to_change_evidence(demo):
    receipt = finished_runs(1)[0]
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
    run = Run.objects.get(id=finished_runs(1)[0].run_id)
    witness_publish(force=True)  # a checkpoint row to refuse changing
    request = ApprovalRequest.objects.create(  # and a decision
        run=run, step=1, call_id="call_1_1", tool="send_email", arguments={}, arguments_sha256="0" * 64,
        approver_role=Group.objects.get(name="secops"), expires_at=run.created_at)
    ApprovalDecision.objects.create(approval=request, user=User.objects.get(username="approver"),
                                    username="approver", role="secops", decision="approved", via="session")
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement.format(table=table))


def test_one_changed_byte_is_detected_and_named_with_its_check(demo):
    receipts = finished_runs(3)
    tampered = receipts[1]
    tamper("UPDATE runs_receipt SET body = REPLACE(body, '\"succeeded\"', '\"succeedeD\"') WHERE id = %s",
            [tampered.id.hex])
    with pytest.raises(CommandError) as error:
        call_command("verify_receipts")
    assert error.value.returncode == 1
    result = receipt_verify_chain()
    assert (result.valid, result.seq, result.receipt, result.check) == (False, 2, str(tampered.id), "chain")
    assert "the body or a hash was edited" in result.reason


def test_the_api_verify_says_which_check_failed(demo, compliance):
    receipts = finished_runs(2)
    ok = compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()
    assert ok["valid"] is True and ok["failures"] == [] and ok["check"] == ""
    tamper("UPDATE runs_run SET output = 'nothing happened' WHERE id = %s", [receipts[1].run_id.hex])
    verdict = compliance.get(f"/api/v1/receipts/{receipts[1].id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "run" and verdict["receipt"] == str(receipts[1].id)
    assert verdict["reason"] == "the run's output differs from the one sealed"


def test_someone_elses_failure_is_reported_without_naming_it(demo, operator, second_operator):
    mine = finished_runs(1)[0]
    other, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                  caller=User.objects.get(username="operator2"))
    services.run_advance(run_id=other.id)
    tamper("DELETE FROM runs_receipt WHERE run_id = %s", [other.id.hex])
    verdict = operator.get(f"/api/v1/receipts/{mine.id}/verify/").json()
    assert verdict["valid"] is False and verdict["check"] == "completeness"
    assert verdict["failures"] == [{"check": "completeness", "record": None, "seq": None, "receipt": None,
                                    "reason": "a record you may not read failed this check"}]
    assert str(other.id) not in json.dumps(verdict)


def test_the_key_set_is_published_to_any_logged_in_user(demo, outsider):
    finished_runs(1)
    document = outsider.get("/api/v1/receipts/keys/").json()
    (key,) = document["keys"]
    assert key["key_id"] == signing.signing_key()[0] and key["status"] == "active" and key["algorithm"] == "Ed25519"
    assert len(base64.b64decode(key["public_key"])) == 32
