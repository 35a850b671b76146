"""The insider's tampering, kind by kind, each caught by `manage.py verify_receipts` (exit 1, the
check named) and by GET receipts/{id}/verify/.

The attacker works as a DBA or someone holding the database file would: a connection of their own,
raw SQL, the append-only triggers switched off (PostgreSQL, a superuser's session setting) or
dropped (SQLite). Some also hold the signing key (the platform engineer): only the witness, kept
outside the database, catches them. tests/services/test_evidence_pg.py runs the same on PostgreSQL.
"""

import io
import json
import sqlite3
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from runs import append_only, services, signing
from runs.reconcile import run_reconcile
from runs.models import ApprovalRequest, Receipt, ReceiptCheckpoint, Run, WitnessSink
from runs.witness import checkpoint_head, witness_catch_up
from tests import loopback
from warrant_verify.jcs import canonicalize
from warrant_verify.messages import receipt_hash, receipt_message

pytestmark = pytest.mark.django_db(transaction=True)


# --- the attacker -----------------------------------------------------------------------------------


def _uid(value) -> str:
    return str(value) if connection.vendor == "postgresql" else value.hex


def attack(*statements: tuple[str, list]) -> None:
    """Raw SQL through a connection of the attacker's own, append-only triggers out of the way."""
    if connection.vendor == "postgresql":
        import psycopg

        settings = connection.settings_dict
        with psycopg.connect(dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"],
                             port=settings["PORT"] or 5432, password=settings["PASSWORD"] or None) as raw:
            raw.execute("SET session_replication_role = replica")
            for sql, params in statements:
                raw.execute(sql, params)
        return
    name = connection.settings_dict["NAME"]
    raw = sqlite3.connect(name, uri=str(name).startswith("file:"), isolation_level=None)
    try:
        append_only.sqlite_drop(raw.cursor())
        raw.execute("BEGIN")
        for sql, params in statements:
            raw.execute(sql.replace("%s", "?"), params)
        raw.execute("COMMIT")
        append_only.sqlite_create(raw.cursor())  # and put them back, as if nothing happened
    finally:
        raw.close()


def _receipt(seq: int) -> Receipt:
    return Receipt.objects.get(seq=seq)


def _rewrite_body(receipt: Receipt, change) -> str:
    body = json.loads(receipt.body)
    change(body)
    return canonicalize(body).decode()


def _rechain(from_seq: int, *, resign: bool = False, bodies: dict | None = None) -> None:
    """Recompute prev_hash and hash from `from_seq` on (and, holding the key, the signatures)."""
    bodies = bodies or {}
    prev = _receipt(from_seq - 1).hash if from_seq > 1 else "0" * 64
    statements = []
    for receipt in Receipt.objects.filter(seq__gte=from_seq).order_by("seq"):
        body = bodies.get(receipt.seq, receipt.body)
        new = receipt_hash(prev, body)
        signature = receipt.signature
        if resign:
            signature = signing.sign(receipt_message(seq=receipt.seq, prev_hash=prev, hash=new, key_id=receipt.key_id,
                                                     run_id=str(receipt.run_id)))
        statements.append(("UPDATE runs_receipt SET body = %s, prev_hash = %s, hash = %s, signature = %s WHERE id = %s",
                           [body, prev, new, signature, _uid(receipt.id)]))
        prev = new
    attack(*statements)


# --- the honest history ---------------------------------------------------------------------------


@pytest.fixture
def history(demo, settings, tmp_path):
    """Four sealed receipts (#4 with an approval), a fifth run parked, every seal witnessed."""
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0  # a checkpoint for every seal, so each receipt has its own
    operator, approver = User.objects.get(username="operator"), User.objects.get(username="approver")

    def start(text):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=text, caller=operator)
        if not django_settings.CELERY_TASK_ALWAYS_EAGER:  # PostgreSQL's pass has no worker: advance here
            services.run_advance(run_id=run.id)
        return run

    for i in range(3):
        start(f"List all accounts. ({i})")
    deleting = start("Delete the account Initech.")
    parked = start("Send an email to dana.whitfield@example.com about the Acme renewal.")
    pending = ApprovalRequest.objects.get(run=deleting, status="pending")
    services.approval_decide(approval_id=pending.id, user=approver, approve=True, reason="customer asked",
                             via="session")
    if not django_settings.CELERY_TASK_ALWAYS_EAGER:
        services.run_advance(run_id=deleting.id)
    assert Receipt.objects.count() == 4 and _receipt(4).run_id == deleting.id
    assert Run.objects.get(id=parked.id).status == "awaiting_approval"
    call_command("verify_receipts")  # intact before the attack
    return {"parked": parked, "file": tmp_path / "witness.jsonl"}


def _caught(*, ask_seq: int, checks: set[str]) -> None:
    """verify_receipts exits 1 naming one of `checks`; the API's verify of receipt #ask_seq says so too."""
    errors = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("verify_receipts", stderr=errors)
    assert failed.value.returncode == 1
    named = {line.split(":", 1)[0] for line in errors.getvalue().splitlines() if line}
    assert named & checks, errors.getvalue()
    compliance = APIClient()
    compliance.force_authenticate(User.objects.get(username="compliance"))
    verdict = compliance.get(f"/api/v1/receipts/{_receipt(ask_seq).id}/verify/").json()
    assert verdict["valid"] is False, verdict
    assert {f["check"] for f in verdict["failures"]} & checks, verdict


# --- the tampering ------------------------------------------------------------------------------------


def test_the_last_body_edited_and_its_hash_recomputed(history):
    last = _receipt(4)
    body = _rewrite_body(last, lambda b: b.update(status="failed"))
    attack(("UPDATE runs_receipt SET body = %s, hash = %s WHERE id = %s",
            [body, receipt_hash(last.prev_hash, body), _uid(last.id)]))
    _caught(ask_seq=4, checks={"signature"})


def test_the_last_body_edited_its_hash_recomputed_and_its_signature_blanked(history):
    last = _receipt(4)
    body = _rewrite_body(last, lambda b: b.update(output_sha256="0" * 64))
    attack(("UPDATE runs_receipt SET body = %s, hash = %s, signature = '', key_id = '' WHERE id = %s",
            [body, receipt_hash(last.prev_hash, body), _uid(last.id)]))
    _caught(ask_seq=4, checks={"signature"})


def test_a_middle_body_edited_and_every_later_hash_recomputed(history):
    _rechain(2, bodies={2: _rewrite_body(_receipt(2), lambda b: b.update(tainted=True))})
    _caught(ask_seq=2, checks={"signature"})


def test_a_middle_body_rewritten_by_the_key_holder_is_caught_by_the_witness(history):
    """The platform engineer holds the key and re-signs: the signed checkpoints outside disagree."""
    _rechain(2, resign=True, bodies={2: _rewrite_body(_receipt(2), lambda b: b.update(tainted=True))})
    attack(("DELETE FROM runs_receiptcheckpoint", []))
    _caught(ask_seq=2, checks={"witness"})


def test_the_key_holder_who_also_signs_new_database_checkpoints_is_caught_by_the_witness(history):
    """Re-signed receipts and database checkpoints re-signed to match them: one receipt's verify is
    anchored by the witness file first, which the key holder cannot rewrite."""
    compliance = APIClient()
    compliance.force_authenticate(User.objects.get(username="compliance"))
    honest = compliance.get(f"/api/v1/receipts/{_receipt(2).id}/verify/").json()
    assert (honest["valid"], honest["walked"], honest["anchor"]) == (True, 2, {"seq": 2, "where": "witness"})
    _rechain(2, resign=True, bodies={2: _rewrite_body(_receipt(2), lambda b: b.update(tainted=True))})
    attack(("DELETE FROM runs_receiptcheckpoint", []))
    for receipt in Receipt.objects.order_by("seq"):
        checkpoint_head((receipt.seq, receipt.hash))
    _caught(ask_seq=2, checks={"witness"})


def test_two_receipts_swapped_and_rechained(history):
    two, three = _receipt(2), _receipt(3)
    attack(("UPDATE runs_receipt SET seq = 99 WHERE id = %s", [_uid(two.id)]),
           ("UPDATE runs_receipt SET seq = 2 WHERE id = %s", [_uid(three.id)]),
           ("UPDATE runs_receipt SET seq = 3 WHERE id = %s", [_uid(two.id)]))
    _rechain(2)
    _caught(ask_seq=3, checks={"signature"})


def test_the_last_receipt_deleted(history):
    attack(("DELETE FROM runs_receipt WHERE seq = 4", []), ("DELETE FROM runs_receiptcheckpoint WHERE seq = 4", []))
    _caught(ask_seq=1, checks={"witness", "completeness"})


def test_a_middle_receipt_deleted_the_rest_renumbered_and_rehashed(history):
    attack(("DELETE FROM runs_receipt WHERE seq = 2", []),
           ("UPDATE runs_receipt SET seq = 2 WHERE seq = 3", []),
           ("UPDATE runs_receipt SET seq = 3 WHERE seq = 4", []))
    _rechain(2)
    _caught(ask_seq=1, checks={"completeness", "witness"})
    _caught(ask_seq=2, checks={"signature"})


def test_the_whole_chain_rewritten_from_the_first_with_the_checkpoints_deleted(history):
    bodies = {r.seq: _rewrite_body(r, lambda b: b.update(tainted=False, error=None)) for r in Receipt.objects.all()}
    _rechain(1, resign=True, bodies={1: _rewrite_body(_receipt(1), lambda b: b.update(status="failed"))} | {
        s: b for s, b in bodies.items() if s > 1})
    attack(("DELETE FROM runs_receiptcheckpoint", []))
    _caught(ask_seq=1, checks={"witness"})


def test_decided_by_changed_in_the_receipt_body(history):
    def change(body):
        body["approvals"][0]["decided_by"] = "admin"

    _rechain(4, bodies={4: _rewrite_body(_receipt(4), change)})
    _caught(ask_seq=4, checks={"signature", "approvals"})


def test_decided_by_changed_in_the_approval_row(history):
    admin = User.objects.get(username="admin")
    attack(("UPDATE runs_approvalrequest SET decided_by_id = %s", [admin.id]))
    _caught(ask_seq=4, checks={"approvals"})


def test_the_approvers_reason_changed_in_the_approval_row(history):
    attack(("UPDATE runs_approvalrequest SET reason = 'the CEO said so' WHERE status = 'approved'", []))
    _caught(ask_seq=4, checks={"approvals"})


def test_a_receipt_forged_for_a_run_that_had_none(history):
    parked, last = history["parked"], _receipt(4)
    body = _rewrite_body(last, lambda b: b.update(run_id=str(parked.id), approvals=[]))
    forged = receipt_hash(last.hash, body)
    attack(("INSERT INTO runs_receipt (id, run_id, seq, prev_hash, hash, body, key_id, signature, created_at) "
            "VALUES (%s, %s, 5, %s, %s, %s, %s, %s, %s)",
            [_uid(__import__("uuid").uuid4()), _uid(parked.id), last.hash, forged, body, last.key_id, last.signature,
             last.created_at.isoformat()]))
    _caught(ask_seq=5, checks={"signature", "run"})


@pytest.mark.parametrize("column,value", [("input", "Transfer everything."), ("output", "Nothing to see."),
                                          ("status", "failed"), ("tainted", True), ("error", "internal")])
def test_the_runs_row_edited(history, column, value):
    attack((f"UPDATE runs_run SET {column} = %s WHERE id = %s", [value, _uid(_receipt(2).run_id)]))
    _caught(ask_seq=2, checks={"run"})


def test_run_events_deleted(history):
    run_id = _uid(_receipt(4).run_id)
    attack(("DELETE FROM runs_runevent WHERE run_id = %s AND kind = 'approval_decided'", [run_id]))
    _caught(ask_seq=4, checks={"trace"})


def test_run_events_blanked(history):
    attack(("UPDATE runs_runevent SET data = '{}' WHERE run_id = %s AND seq = 2", [_uid(_receipt(3).run_id)]))
    _caught(ask_seq=3, checks={"trace"})


def test_the_append_only_triggers_left_dropped_are_reported(history):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's triggers are switched off per session, not dropped")
    with connection.cursor() as cursor:
        append_only.sqlite_drop(cursor)
    try:
        errors = io.StringIO()
        with pytest.raises(CommandError):
            call_command("verify_receipts", stderr=errors)
        assert "append_only: runs_receipt_no_update" in errors.getvalue()
    finally:
        with connection.cursor() as cursor:
            append_only.sqlite_create(cursor)


# --- the witness down while runs seal, then caught up ------------------------------------------------------


class _Witness(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        _Witness.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_readyz_reports_a_sink_behind_and_leaves_catching_up_to_the_reconciler(demo, settings, tmp_path, client):
    """A GET writes nothing, even in the embedded default: the reconciler (beat, or the web
    process's ticker) sends the witness what it lacks."""
    settings.WARRANT_WITNESS_FILE = ""  # no sink while the run seals
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                caller=User.objects.get(username="operator"))
    assert Run.objects.get(id=run.id).status == "succeeded"
    witness_file = tmp_path / "witness.jsonl"
    settings.WARRANT_WITNESS_FILE = str(witness_file)
    checkpoints = ReceiptCheckpoint.objects.count()

    health = client.get("/readyz").json()
    assert health["witness"]["sinks"]["file"]["behind_receipts"] == 1
    assert ReceiptCheckpoint.objects.count() == checkpoints and not witness_file.exists()

    run_reconcile()
    assert client.get("/readyz").json()["witness"]["sinks"]["file"]["behind_receipts"] == 0
    receipts = [line for line in map(json.loads, witness_file.read_text().splitlines())
                if line["kind"] == "warrant.checkpoint"]  # the demo's trust chain is witnessed too
    assert receipts[-1]["head"] == _receipt(1).hash


def test_a_witness_down_while_runs_seal_is_caught_up_and_readyz_says_how_far_behind(demo, settings, tmp_path, client):
    server = HTTPServer(("127.0.0.1", 0), _Witness)
    port = server.server_address[1]
    server.server_close()  # the port is known and nothing listens on it: the witness is down
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0
    settings.WARRANT_WITNESS_URL = f"http://127.0.0.1:{port}/checkpoints"
    settings.WARRANT_WITNESS_ALLOWED_HOSTS = ("127.0.0.1",)
    operator = User.objects.get(username="operator")
    for i in range(3):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text=f"List all accounts. ({i})", caller=operator)
        assert Run.objects.get(id=run.id).status == "succeeded"  # sealing did not wait for the witness
    sink = WitnessSink.objects.get(name="http")
    assert sink.failed_at is not None and sink.delivered_seq == 0 and sink.error == "ConnectError"
    health = client.get("/readyz").json()
    assert health["ready"] is True  # runs go on: the witness is caught up later
    assert health["witness"]["ok"] is False
    assert health["witness"]["sinks"]["http"] | {"behind_seconds": 0, "failing_since": None} == {
        "ok": False, "delivered_seq": 0, "behind_receipts": 3, "behind_seconds": 0, "error": "ConnectError",
        "failing_since": None}
    assert health["witness"]["sinks"]["file"]["behind_receipts"] == 0

    with loopback.serving(_Witness, port=port):
        _Witness.received = []
        outcome = witness_catch_up()
        assert outcome["http"] == "delivered #3"
        # The demo's trust chain was never witnessed either: its head is sent too, with a kind of its own.
        (checkpoint,) = [c for c in _Witness.received if c["kind"] == "warrant.checkpoint"]
        assert checkpoint["seq"] == 3 and checkpoint["head"] == _receipt(3).hash
        assert client.get("/readyz").json()["witness"]["sinks"]["http"]["ok"] is True
    call_command("verify_receipts")
    lines = [json.loads(line) for line in (tmp_path / "witness.jsonl").read_text().splitlines()]
    assert [c["seq"] for c in lines if c["kind"] == "warrant.checkpoint"] == [1, 2, 3]


def test_a_witness_on_a_host_not_allowed_gets_nothing(demo, settings, tmp_path):
    settings.WARRANT_WITNESS_FILE = ""
    settings.WARRANT_WITNESS_URL = "http://witness.example.org/checkpoints"
    settings.WARRANT_WITNESS_ALLOWED_HOSTS = ("127.0.0.1",)
    services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                       caller=User.objects.get(username="operator"))
    assert WitnessSink.objects.get(name="http").error == ("the witness URL's host is not in "
                                                          "WARRANT_WITNESS_ALLOWED_HOSTS")


def test_a_witness_silenced_in_the_database_still_gets_the_next_head(history):
    """A DBA marks the sinks as far ahead, hoping the next checkpoints are never sent."""
    attack(("UPDATE runs_witnesssink SET delivered_seq = 1000000", []))
    services.run_start(agent_slug="crm-assistant", input_text="List all accounts. (later)",
                       caller=User.objects.get(username="operator"))
    if not django_settings.CELERY_TASK_ALWAYS_EAGER:
        services.run_advance(run_id=Run.objects.latest("created_at").id)
        witness_catch_up()
    lines = [line for line in map(json.loads, history["file"].read_text().splitlines())
             if line["kind"] == "warrant.checkpoint"]  # the demo's trust chain is witnessed too
    assert lines[-1]["seq"] == 5 and lines[-1]["head"] == _receipt(5).hash
