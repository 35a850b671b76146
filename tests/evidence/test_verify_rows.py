"""The bundle's rows (events, approvals, runs) against what each run's receipt sealed.

Tampering with the ledger models an insider editing tables before an honest export, which then
signs a manifest over the lie: only the receipts can tell.
"""

from tests.evidence.bundles import write_bundle
from tests.evidence.verifying import verify
from warrant_verify.messages import GENESIS, event_hash


def test_an_event_deleted_fails_the_trace(tmp_path, capsys, ledger):
    run_id = ledger.receipts[2]["run_id"]
    ledger.events.remove([e for e in ledger.events if e["run_id"] == run_id][1])
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert f"events.jsonl: run {run_id}: 3 events in the bundle, the receipt sealed 4" in out
    assert f"events.jsonl: run {run_id}: the events do not hash to the trace head sealed in the receipt" in out


def test_an_event_blanked_and_its_chain_recomputed_fails_the_trace_head(tmp_path, capsys, ledger):
    run_id = ledger.receipts[0]["run_id"]
    events = [e for e in ledger.events if e["run_id"] == run_id]
    events[1]["data"] = {}
    prev = GENESIS
    for event in events:
        event["hash"] = prev = event_hash(prev=prev, seq=event["seq"], step=event["step"], kind=event["kind"],
                                          data=event["data"])
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert out == [f"events.jsonl: run {run_id}: the events do not hash to the trace head sealed in the receipt"]


def test_decided_by_changed_in_approvals_fails(tmp_path, capsys, ledger):
    row = ledger.approvals[2]
    row["decided_by"] = "mallory"
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert out == [f"approvals.jsonl: approval {row['id']}: decided_by differ from what run {row['run_id']}'s "
                   "receipt sealed"]


def test_a_run_edited_or_without_a_receipt_fails(tmp_path, capsys, ledger):
    unsealed = ledger.run(seal=False)
    ledger.runs[0]["status"] = "failed"
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert out == [f"runs.jsonl: run {ledger.runs[0]['id']}: status differ from what its receipt sealed",
                   f"runs.jsonl: run {unsealed}: a terminal run with no receipt in the bundle"]
