"""The witness against the bundle: what only checkpoints kept outside the database can tell (a cut tail, a
chain rewritten by a key holder), and what they must not be taken for.
"""

import json

from tests.evidence.bundles import Ledger, write_bundle, write_witness
from tests.evidence.verifying import chain_key, verify


def _drop_last_run(ledger: Ledger) -> None:
    """The insider's thorough truncation: the last receipt and every row that would miss it."""
    run_id = ledger.receipts.pop()["run_id"]
    ledger.checkpoints.pop()
    ledger.runs = [run for run in ledger.runs if run["id"] != run_id]
    ledger.events = [event for event in ledger.events if event["run_id"] != run_id]
    ledger.approvals = [row for row in ledger.approvals if row["run_id"] != run_id]


def test_a_truncated_tail_is_caught_by_the_witness_only(tmp_path, capsys, ledger):
    _drop_last_run(ledger)
    bundle = write_bundle(ledger, tmp_path / "bundle")
    assert verify(capsys, bundle)[0] == 0  # the database alone cannot tell: why the witness exists
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    assert code == 1
    assert out == ["witness.jsonl: checkpoint 4: checkpoint at seq 4 is past the bundle's last receipt "
                   "(seq 3, head 3): the chain's tail was cut off"]


def test_a_truncated_tail_is_caught_by_the_witness_in_a_bounded_bundle_too(tmp_path, capsys, ledger):
    _drop_last_run(ledger)
    bundle = write_bundle(ledger, tmp_path / "bundle", period_to="2026-11-30T23:00:00Z")
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    assert code == 1
    assert out == ["witness.jsonl: checkpoint 4: checkpoint at seq 4, signed before the bundle was made, is past "
                   "the chain's head the bundle recorded (seq 3): the tail was cut off"]


def test_a_witness_checkpoint_newer_than_a_bounded_bundle_is_not_a_truncation(tmp_path, capsys, ledger):
    bundle = write_bundle(ledger, tmp_path / "bundle", period_to="2026-11-30T10:00:00Z")
    ledger.run()  # sealed after the export: the witness read later knows it
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    assert code == 0, out


def test_a_witness_checkpoint_with_an_unreadable_time_is_never_taken_as_newer(tmp_path, capsys, ledger):
    from tests.evidence.bundles import sign
    from warrant_verify.messages import checkpoint_message

    bundle = write_bundle(ledger, tmp_path / "bundle", period_to=None)
    late = ledger.checkpoint(9, "e" * 64)
    late["at"] = "tomorrow"
    late["signature"] = sign(ledger.key, checkpoint_message({k: v for k, v in late.items() if k != "signature"}))
    ledger.witness.append(late)
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    assert code == 1 and out == ["witness.jsonl: checkpoint 9: checkpoint at seq 9 is past the bundle's last receipt "
                                 "(seq 4, head 4): the chain's tail was cut off"]


def test_a_chain_rewritten_from_the_first_receipt_with_the_key_is_caught_by_the_witness(tmp_path, capsys, ledger):
    witness = write_witness(ledger, tmp_path / "witness.jsonl")
    # A key holder rewrites history: new bodies, re-signed, the database's checkpoints replaced.
    bodies = [json.loads(record["body"]) for record in ledger.receipts]
    bodies[0]["output_sha256"] = "0" * 64
    ledger.receipts, ledger.checkpoints = [], []
    for body in bodies:
        ledger.seal(body)
    ledger.runs[0]["output_sha256"] = "0" * 64
    bundle = write_bundle(ledger, tmp_path / "bundle")
    assert verify(capsys, bundle)[0] == 0
    code, out = verify(capsys, bundle, "--witness", witness)
    assert code == 1
    assert [line.split(":")[1].strip() for line in out] == [f"checkpoint {n}" for n in range(1, 5)]


def test_a_bad_checkpoint_in_both_places_is_named_in_both(tmp_path, capsys, ledger):
    ledger.checkpoints[1]["signature"] = ledger.checkpoints[0]["signature"]  # the witness holds the same dict
    bundle = write_bundle(ledger, tmp_path / "bundle")
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    reason = f"signature does not verify with key {chain_key(ledger.key)}"
    assert code == 1 and out == [f"checkpoints.jsonl: checkpoint 2: {reason}", f"witness.jsonl: checkpoint 2: {reason}"]
