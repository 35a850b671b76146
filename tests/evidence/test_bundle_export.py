"""Evidence bundles as an auditor takes them: exported by the command or the API from real runs,
checked by the offline verifier in its own process (exit 0), and every file's tampering caught."""

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from runs import append_only, signing
from runs.evidence import BUNDLE_FILES
from runs.models import Receipt, ReceiptAccess, ReceiptCheckpoint
from tests.evidence.fresh_venv import fresh_verifier
from tests.runs.helpers import start
from warrant_verify.keys import verify_signature
from warrant_verify.messages import receipt_message

REPO = Path(__file__).resolve().parents[2]


def verify(path: Path, *extra: str, python: str = sys.executable, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "warrant_verify", str(path), *extra], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def named(result: subprocess.CompletedProcess, name: str) -> bool:
    return any(line.startswith(f"{name}: ") for line in result.stdout.splitlines())


def work(operator, approver) -> None:
    """A succeeded run, a blocked one, an approval granted and one denied, each with its reason."""
    start(operator, "List all accounts.")
    start(operator, "What is Dana Whitfield's salary?")
    run = start(operator, "Delete the account Initech.")
    assert approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/approve/",
                         {"reason": "customer asked in writing"}, format="json").status_code == 200
    run = start(operator, "Send an email to dana.whitfield@example.com about the Acme renewal.")
    assert approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/deny/",
                         {"reason": "not <b>now</b>"}, format="json").status_code == 200


def export(out: Path, *args: str) -> Path:
    call_command("export_evidence", "--out", str(out), "--user", "compliance", *args, stdout=io.StringIO())
    return out


def api_bundle(client, query: str = "") -> bytes:
    response = client.get(f"/api/v1/receipts/export/?format=bundle{query}")
    assert response.status_code == 200, response.content if hasattr(response, "content") else response
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="warrant-evidence')
    return b"".join(response.streaming_content)


def manifest_of(path: Path) -> dict:
    if path.is_dir():
        return json.loads((path / "manifest.json").read_bytes())
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("manifest.json"))


def flip_one_byte(data: bytes) -> bytes:
    if not data:  # an empty file (no approval in the period, say) gains one
        return b"\n"
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:]


# --- a bundle verifies, and each of its files is covered ------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_bundle_from_the_command_verifies_offline_and_a_byte_changed_in_any_file_fails_naming_it(
        operator, approver, tmp_path):
    work(operator, approver)
    bundle = export(tmp_path / "bundle")
    assert sorted(p.name for p in bundle.iterdir()) == sorted(BUNDLE_FILES)
    result = verify(bundle)
    assert result.returncode == 0, result.stdout + result.stderr
    chain = manifest_of(bundle)["chain"]
    assert (chain["first_seq"], chain["last_seq"], chain["head_seq"]) == (1, 4, 4)

    summary = (bundle / "summary.html").read_text()
    assert "customer asked in writing" in summary and "approver" in summary
    assert "not &lt;b&gt;now&lt;/b&gt;" in summary and "<b>now" not in summary  # escaped
    assert "<script" not in summary and "src=" not in summary and "<link" not in summary and "http" not in summary
    assert "python -m warrant_verify" in summary

    for name in BUNDLE_FILES:
        copy = tmp_path / f"changed-{name}"
        copy.mkdir()
        for source in bundle.iterdir():
            data = source.read_bytes()
            (copy / source.name).write_bytes(flip_one_byte(data) if source.name == name else data)
        result = verify(copy)
        assert result.returncode == 1, (name, result.stdout)
        assert named(result, name), (name, result.stdout)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_bundle_from_the_api_is_a_zip_that_verifies_and_any_entry_changed_fails_naming_it(
        operator, approver, compliance, tmp_path):
    work(operator, approver)
    zipped = tmp_path / "bundle.zip"
    zipped.write_bytes(api_bundle(compliance))
    result = verify(zipped)
    assert result.returncode == 0, result.stdout + result.stderr
    with zipfile.ZipFile(zipped) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    assert sorted(entries) == sorted(BUNDLE_FILES)
    for name in BUNDLE_FILES:
        changed = tmp_path / f"changed-{name}.zip"
        with zipfile.ZipFile(changed, "w") as archive:
            for entry, data in entries.items():
                archive.writestr(entry, flip_one_byte(data) if entry == name else data)
        result = verify(changed)
        assert result.returncode == 1 and named(result, name), (name, result.stdout)


# --- a period is a piece of the chain ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_period_exports_a_piece_of_the_chain_that_verifies_on_its_own(operator, approver, compliance, tmp_path):
    start(operator, "List all accounts.")
    start(operator, "What is the usage trend for Umbrella?")
    begin = timezone.now()
    work(operator, approver)  # receipts #3 to #6
    end = timezone.now()
    start(operator, "List all accounts.")  # #7, after the period
    receipts = {r.seq: r for r in Receipt.objects.all()}

    bounded = export(tmp_path / "bounded", "--from", begin.isoformat(), "--to", end.isoformat())
    manifest = manifest_of(bounded)
    assert manifest["chain"] == {"first_seq": 3, "last_seq": 6, "start_prev_hash": receipts[2].hash,
                                 "head_seq": 7, "head_hash": receipts[7].hash}
    assert manifest["period"]["to"] is not None
    assert [json.loads(line)["seq"] for line in (bounded / "receipts.jsonl").read_text().splitlines()] == [3, 4, 5, 6]
    runs = [json.loads(line) for line in (bounded / "runs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in runs] == [str(receipts[seq].run_id) for seq in (3, 4, 5, 6)]
    assert all(r["has_receipt"] for r in runs)
    result = verify(bounded)
    assert result.returncode == 0, result.stdout + result.stderr

    # A run's end moved out of the period (runs are not append-only) does not take its receipt along.
    _raw("UPDATE runs_run SET finished_at = %s WHERE id = %s", ["2001-01-01 00:00:00", receipts[3].run_id.hex])
    moved = export(tmp_path / "moved", "--from", begin.isoformat(), "--to", end.isoformat())
    assert manifest_of(moved)["chain"]["first_seq"] == 3

    # Open-ended, over the API: from the period's start up to the head.
    zipped = tmp_path / "tail.zip"
    zipped.write_bytes(api_bundle(compliance, f"&created_after={begin.isoformat().replace('+00:00', 'Z')}"))
    assert manifest_of(zipped)["chain"]["first_seq"] == 3 and manifest_of(zipped)["chain"]["last_seq"] == 7
    result = verify(zipped)
    assert result.returncode == 0, result.stdout + result.stderr

    # A period in which nothing finished is an empty piece, placed where it sits, and still verifies.
    empty = export(tmp_path / "empty", "--from", "2001-01-01", "--to", "2001-01-02")
    assert manifest_of(empty)["chain"]["first_seq"] == 1 and manifest_of(empty)["chain"]["last_seq"] == 0
    assert verify(empty).returncode == 0


# --- the export hands over the database as it is ---------------------------------------------------


def _raw(sql: str, params: list) -> None:
    """An insider with the database: the append-only triggers dropped for the statement."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
        else:
            append_only.sqlite_drop(cursor)
        cursor.execute(sql, params)
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = origin")
        else:
            append_only.sqlite_create(cursor)


@pytest.mark.django_db(transaction=True)
def test_rows_edited_after_sealing_go_out_as_edited_and_the_verifier_names_them(operator, approver, tmp_path):
    work(operator, approver)
    approved = Receipt.objects.get(seq=3)
    _raw("UPDATE runs_run SET output = %s WHERE id = %s", ["nothing was deleted", approved.run_id.hex])
    _raw("UPDATE runs_approvalrequest SET reason = %s WHERE run_id = %s", ["policy allows it", approved.run_id.hex])
    blocked = Receipt.objects.get(seq=2)
    _raw("UPDATE runs_runevent SET data = %s WHERE run_id = %s AND seq = 1", ['{"input": "hello"}',
                                                                              blocked.run_id.hex])
    result = verify(export(tmp_path / "bundle"))
    assert result.returncode == 1
    assert named(result, "runs.jsonl") and named(result, "approvals.jsonl"), result.stdout
    assert f"events.jsonl: run {blocked.run_id} event 1: " in result.stdout, result.stdout


@pytest.mark.django_db(transaction=True)
def test_the_witness_file_keeps_the_checkpoints_the_database_lost_and_a_cut_tail_shows(operator, tmp_path):
    witness = tmp_path / "witness.jsonl"
    with override_settings(WARRANT_WITNESS_FILE=str(witness), WARRANT_WITNESS_INTERVAL_SECONDS=0):
        for _ in range(3):
            start(operator, "List all accounts.")
        assert len(witness.read_text().splitlines()) == 3
        _raw("DELETE FROM runs_receiptcheckpoint", [])
        intact = export(tmp_path / "intact")
        lines = (intact / "checkpoints.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["seq"] for line in lines) == [1, 2, 3]
        assert verify(intact).returncode == 0

        last = Receipt.objects.get(seq=3)
        _raw("DELETE FROM runs_receipt WHERE id = %s", [last.id.hex])
        assert not ReceiptCheckpoint.objects.exists()
        result = verify(export(tmp_path / "cut"))
    assert result.returncode == 1
    assert named(result, "checkpoints.jsonl") and named(result, "runs.jsonl"), result.stdout


# --- the access log, the permissions, bad input ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_every_export_is_in_the_access_log_with_who_the_period_and_the_format(operator, compliance, tmp_path):
    start(operator, "List all accounts.")
    export(tmp_path / "bundle", "--from", "2020-01-01")
    api_bundle(compliance, "&created_before=2999-01-01T00:00:00Z")
    compliance.get("/api/v1/receipts/export/?format=jsonl&created_after=2020-01-01T00:00:00Z")
    compliance.get("/api/v1/receipts/export/?format=csv")
    rows = list(ReceiptAccess.objects.filter(action="export").order_by("id").values_list(
        "username", "channel", "format", "count", "query"))
    assert [row[:4] for row in rows] == [("compliance", "command", "bundle", 1), ("compliance", "api", "bundle", 1),
                                         ("compliance", "api", "jsonl", 1), ("compliance", "api", "csv", 1)]
    assert rows[0][4].startswith("created_after=2020-01-01T00:00:00Z&created_before=&seq=1-1&head=1&os_user=")
    assert "created_before=2999-01-01T00:00:00Z" in rows[1][4] and "created_after=2020-01-01" in rows[2][4]


@pytest.mark.parametrize("query, parameter", [
    ("&created_after=yesterday", "created_after"),
    ("&created_after=2026-02-30", "created_after"),
    ("&created_before=", "created_before"),
    ("&created_after=2026-01-01&created_after=2026-02-01", "created_after"),
    ("&created_after=2026-02-01&created_before=2026-01-01", "created_before"),
    ("&status=succeeded", "status"),
    ("&seq_after=3", "seq_after"),
])
def test_a_bundle_query_it_cannot_honour_is_a_400_naming_the_parameter(compliance, query, parameter):
    response = compliance.get(f"/api/v1/receipts/export/?format=bundle{query}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert parameter in response.json()["error"]["details"]
    assert not ReceiptAccess.objects.filter(format="bundle").exists()


def test_only_a_reader_of_every_receipt_takes_a_bundle(operator, outsider):
    for client in (operator, outsider):
        response = client.get("/api/v1/receipts/export/?format=bundle")
        assert response.status_code == 403 and "compliance" in response.json()["error"]["message"]
    assert not ReceiptAccess.objects.filter(format="bundle").exists()


@pytest.mark.parametrize("args, message", [
    (["--from", "31/01/2026"], "--from: '31/01/2026' is not an ISO 8601 date"),
    (["--to", "2026-01-32"], "--to: '2026-01-32' is not an ISO 8601 date"),
    (["--from", "2026-02-01", "--to", "2026-01-01"], "must start before it ends"),
    (["--from", "0001-01-01T00:00:00+01:00"], "outside the years 1 to 9999 in UTC"),
    (["--user", "operator"], "only compliance"),
    (["--user", "nobody"], "no active user 'nobody'"),
])
def test_the_command_refuses_what_it_cannot_do_with_a_clear_error(demo, tmp_path, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("export_evidence", "--out", str(tmp_path / "b"), *(["--user", "compliance"] + args))
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


@pytest.mark.parametrize("query", ["created_before=0001-01-01T00:00:00%2B01:00",
                                   "created_after=9999-12-31T23:59:59-01:00"])
@pytest.mark.parametrize("kind", ["bundle", "jsonl"])
def test_a_bound_with_no_utc_time_is_a_400(compliance, query, kind):
    response = compliance.get(f"/api/v1/receipts/export/?format={kind}&{query}")
    assert response.status_code == 400 and "outside the years 1 to 9999" in response.content.decode()
    runs = compliance.get(f"/api/v1/runs/?{query}")
    assert runs.status_code == 400 and "outside the years 1 to 9999" in runs.content.decode()


def test_the_command_writes_into_an_empty_directory_only(demo, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="not an empty directory"):
        export(tmp_path / "b")
    export(tmp_path / "b.zip")
    assert zipfile.is_zipfile(tmp_path / "b.zip")
    with pytest.raises(CommandError, match="exists"):
        export(tmp_path / "b.zip")


# --- on an auditor's machine -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_bundle_the_api_made_verifies_in_a_fresh_venv_with_only_cryptography(operator, approver, compliance,
                                                                                tmp_path):
    witness = tmp_path / "witness.jsonl"
    with override_settings(WARRANT_WITNESS_FILE=str(witness)):
        work(operator, approver)
        zipped = tmp_path / "bundle.zip"
        zipped.write_bytes(api_bundle(compliance))
        keys = tmp_path / "keys.json"
        keys.write_bytes(compliance.get("/api/v1/receipts/keys/").content)
    auditor = fresh_verifier(tmp_path / "machine")
    result = auditor(zipped, "--public-key", keys, "--witness", witness)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("intact: bundle.zip: 4 receipts") and "--public-key" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_a_json_lines_export_carries_each_receipts_key_id_and_signature(operator, compliance):
    start(operator, "List all accounts.")
    line = json.loads(compliance.get("/api/v1/receipts/export/?format=jsonl").content)
    message = receipt_message(seq=line["seq"], prev_hash=line["prev_hash"], hash=line["hash"], key_id=line["key_id"],
                              run_id=line["run_id"])
    assert verify_signature(signing.key_set(), line["key_id"], message, line["signature"]) == ""


def test_the_policies_are_those_in_force_when_the_period_starts_and_every_change_in_it(demo):
    from datetime import UTC, datetime

    from governance.models import PolicyVersion
    from runs import evidence_rows
    from runs.evidence import evidence_bundle_plan
    from runs.evidence_summary import Tally

    def version(name, number, action, month):
        row = PolicyVersion.objects.create(policy_name=name, version=number, action=action,
                                           new_values=None if action == "delete" else {"v": number})
        PolicyVersion.objects.filter(id=row.id).update(changed_at=datetime(2025, month, 1, tzinfo=UTC))

    version("kept", 1, "create", 1)
    version("kept", 2, "update", 3)   # in force on 1 April
    version("kept", 3, "update", 5)   # changed in the period
    version("kept", 4, "update", 7)   # after it
    version("gone", 1, "create", 1)
    version("gone", 2, "delete", 2)   # deleted before the period: not in force
    version("late", 1, "create", 6)   # after it
    plan = evidence_bundle_plan(created_after=datetime(2025, 4, 1, tzinfo=UTC),
                                created_before=datetime(2025, 6, 1, tzinfo=UTC))
    rows = list(evidence_rows.policies(plan, Tally(plan=plan, requested_by="compliance")))
    assert [(r["policy_name"], r["version"], r["values"]) for r in rows] == [("kept", 2, {"v": 2}), ("kept", 3, {"v": 3})]
