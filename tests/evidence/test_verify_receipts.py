"""The offline verifier (python -m warrant_verify) on the receipt chain: an intact bundle passes, and a
receipt edited, deleted, forged, doubled or not canonical fails, every failure listed.
"""

import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.evidence.bundles import Ledger, write_bundle, write_witness
from tests.evidence.verifying import chain_key, pem, verify
from warrant_verify import chain
from warrant_verify.jcs import canonicalize


def test_an_intact_bundle_passes_as_a_directory_and_as_a_zip(tmp_path, capsys, ledger):
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 0 and len(out) == 1
    assert out[0].startswith("intact: bundle: 4 receipts (seq 1-4), 4 runs") and "keys.json inside the bundle" in out[0]
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True),
                       "--public-key", pem(tmp_path, ledger.key), "--witness", write_witness(ledger, tmp_path / "w"))
    assert code == 0, out
    assert "trusted from --public-key" in out[0] and "4 checkpoints in w" in out[0]


def test_an_empty_bundle_passes(tmp_path, capsys):
    ledger = Ledger()
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "empty"))
    assert code == 0 and out[0].startswith("intact: empty: 0 receipts (seq 1-0), 0 runs"), out


def test_a_receipt_edited_and_rehashed_fails_its_signature(tmp_path, capsys, ledger):
    record = ledger.receipts[1]
    body = json.loads(record["body"])
    body["approvals"][0]["decided_by"] = "mallory"
    record["body"] = canonicalize(body).decode()
    ledger.rechain(1)
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert "receipts.jsonl: seq 2: signature does not verify with key " + ledger.receipts[1]["key_id"] in out
    # every later receipt's prev_hash moved, so their signatures fail too; the chain links do not
    assert sum("signature does not verify" in line for line in out) == 3
    assert not any("prev_hash" in line or "hash is not" in line for line in out)


def test_a_middle_receipt_deleted_and_the_rest_renumbered_fails(tmp_path, capsys, ledger):
    gone = ledger.receipts.pop(1)
    ledger.checkpoints = [c for c in ledger.checkpoints if c["seq"] < 2]
    ledger.rechain(1)
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"), "--witness",
                       write_witness(ledger, tmp_path / "witness.jsonl"))
    assert code == 1
    assert "receipts.jsonl: seq 2: signature does not verify with key " + gone["key_id"] in out
    assert f"runs.jsonl: run {gone['run_id']}: a terminal run with no receipt in the bundle" in out
    assert any(line.startswith("witness.jsonl: checkpoint 2: signed head for seq 2 differs") for line in out)
    assert any(line.startswith("witness.jsonl: checkpoint 4: checkpoint at seq 4 is past") for line in out)


def test_a_forged_receipt_for_a_run_that_had_none_fails(tmp_path, capsys, ledger):
    run_id = ledger.run(seal=False)
    ledger.runs[-1]["has_receipt"] = True
    body = ledger.body(run_id, status="succeeded", approvals=[], events=4,
                       head=[e for e in ledger.events if e["run_id"] == run_id][-1]["hash"])
    ledger.seal(body, key=Ed25519PrivateKey.generate())
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert any(line.startswith("receipts.jsonl: seq 5: signed by unknown key") for line in out), out


def test_a_second_receipt_for_a_run_fails(tmp_path, capsys, ledger):
    ledger.seal(json.loads(ledger.receipts[0]["body"]))
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 1
    assert out == [f"receipts.jsonl: seq 5: second receipt for run {ledger.receipts[0]['run_id']} "
                   "(first at seq 1): a run has exactly one"]


def test_a_non_canonical_body_fails_even_when_hashed_and_signed(tmp_path, capsys, ledger):
    from tests.evidence.bundles import sign
    from warrant_verify.messages import receipt_hash, receipt_message

    record = ledger.receipts[-1]
    record["body"] = json.dumps(json.loads(record["body"]))  # spaces and code-point order
    record["hash"] = receipt_hash(record["prev_hash"], record["body"])
    record["signature"] = sign(ledger.key, receipt_message(seq=4, prev_hash=record["prev_hash"], hash=record["hash"],
                                                           key_id=record["key_id"], run_id=record["run_id"]))
    ledger.witness = ledger.checkpoints = ledger.checkpoints[:-1]
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert out == ["receipts.jsonl: seq 4: body is not RFC 8785 canonical JSON"] and code == 1


def test_every_failure_is_listed_and_the_walk_resyncs_after_a_gap(ledger):
    keys = {chain_key(ledger.key): ledger.key.public_key()}
    records = [dict(record) for record in ledger.receipts]
    del records[1]
    records[2]["body"] = records[2]["body"].replace("operator", "0perator")
    result = chain.verify_receipts(records, keys=keys)
    assert [str(failure) for failure in result.failures] == [
        "receipts.jsonl: seq 3: seq 3 where 2 was expected: a receipt is missing, duplicated or out of order",
        "receipts.jsonl: seq 3: prev_hash does not link to the hash of the receipt before it (seq 1)",
        # the signature covers the stored hash, which was left alone: only the hash check fails
        "receipts.jsonl: seq 4: hash is not sha256(prev_hash + body): the body or a hash was edited",
    ]
    assert (result.checked, result.head_seq, result.head_hash) == (3, 4, ledger.receipts[3]["hash"])
