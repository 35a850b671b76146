"""Keys: rotated keys still verify old receipts, a retired key's bound holds against its thief, and only
an out-of-band public key tells a bundle re-signed by an impostor.
"""

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.evidence.bundles import Ledger, standard_ledger, write_bundle, write_witness
from tests.evidence.verifying import chain_key, pem, verify
from warrant_verify import chain


def test_rotated_keys_still_verify_old_receipts(tmp_path, capsys):
    ledger = standard_ledger(2)
    old = ledger.key
    new = ledger.rotate()
    ledger.run()
    document = ledger.key_document()
    assert [entry["status"] for entry in document["keys"]] == ["retired", "active"]
    bundle = write_bundle(ledger, tmp_path / "bundle")
    # The trusted (new) key signs the manifest, which pins keys.json, which holds the retired key.
    code, out = verify(capsys, bundle, "--public-key", pem(tmp_path, new))
    assert code == 0, out
    assert "receipt keys: " in out[0] and f"{chain_key(old)} (retired after #2)" in out[0]
    assert f"{chain_key(new)} (active)" in out[0] and "WARNING" not in out[0]
    assert document["keys"][0]["retired_after_seq"] == 2 and document["keys"][0]["retired_at"].endswith("Z")
    # The published key set itself works as --public-key too.
    (tmp_path / "keys.json").write_text(json.dumps(document))
    assert verify(capsys, bundle, "--public-key", tmp_path / "keys.json")[0] == 0
    # Without the retired key the old receipts are unverifiable: rotation really needs keys.json.
    files = json.loads((bundle / "keys.json").read_text())
    assert {entry["key_id"] for entry in files["keys"]} == {chain_key(old), chain_key(new)}


def _rotated_and_stolen(tmp_path):
    """Two receipts by the old key, rotation at #2, one by the new key: the old private key was kept by someone."""
    ledger = standard_ledger(2)
    old = ledger.key
    ledger.rotate()
    ledger.run()
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "keys.json").write_text(json.dumps(ledger.key_document()))
    return ledger, old


def _forge_run(ledger: Ledger, key: Ed25519PrivateKey) -> dict:
    """What the holder of a stolen key does: a run row in the database and its receipt (and checkpoint) signed."""
    run_id = ledger.run(seal=False, approvals=0)
    ledger.runs[-1]["has_receipt"] = True
    head = [e for e in ledger.events if e["run_id"] == run_id][-1]["hash"]
    return ledger.seal(ledger.body(run_id, status="succeeded", approvals=[], events=4, head=head), key=key)


def test_a_receipt_past_its_keys_retirement_fails_and_those_before_it_verify(tmp_path, capsys):
    ledger, old = _rotated_and_stolen(tmp_path)
    forged = _forge_run(ledger, old)
    bundle = write_bundle(ledger, tmp_path / "bundle")  # an honest export of the database the thief wrote to
    reason = f"signed by key {chain_key(old)} retired after #2"
    for trusted in (pem(tmp_path, ledger.key), tmp_path / "keys.json"):
        code, out = verify(capsys, bundle, "--public-key", trusted)
        assert code == 1
        assert out == [f"receipts.jsonl: seq {forged['seq']}: {reason}", f"checkpoints.jsonl: checkpoint 4: {reason}"]
    # Without the theft the same key set verifies seq 1 and 2 by the old key.
    ledger, old = _rotated_and_stolen(tmp_path / "honest")
    assert verify(capsys, write_bundle(ledger, tmp_path / "honest" / "bundle"), "--public-key",
                  tmp_path / "honest" / "keys.json")[0] == 0


def test_a_checkpoint_by_a_retired_key_dated_after_its_retirement_fails(tmp_path, capsys):
    ledger, old = _rotated_and_stolen(tmp_path)
    late = ledger.checkpoint(2, ledger.receipts[1]["hash"], key=old)  # a true head, signed after retirement
    ledger.witness.append(late)
    bundle = write_bundle(ledger, tmp_path / "bundle")
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    retired_at = ledger.key_document()["keys"][0]["retired_at"]
    assert code == 1 and out == [f"witness.jsonl: checkpoint 2: signed by key {chain_key(old)} retired at "
                                 f"{retired_at}, dated after it ({late['at']})"]


def test_a_manifest_signed_by_a_retired_key_fails_past_its_bound(tmp_path, capsys):
    ledger, old = _rotated_and_stolen(tmp_path)
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "late", key=old), "--public-key",
                       tmp_path / "keys.json")
    assert code == 1 and out == [f"manifest.json: signature: signed by key {chain_key(old)} retired after #2"]
    # A bundle only as long as the old key's chain, but made after the rotation: its date gives it away.
    ledger = standard_ledger(2)
    old = ledger.key
    ledger.rotate()
    (tmp_path / "keys.json").write_text(json.dumps(ledger.key_document()))
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "dated", key=old), "--public-key",
                       tmp_path / "keys.json")
    assert code == 1 and len(out) == 1
    assert out[0].startswith(f"manifest.json: signature: signed by key {chain_key(old)} retired at ")


def test_a_key_set_from_before_bounds_still_verifies_and_the_summary_warns(tmp_path, capsys):
    ledger = standard_ledger(2)
    old = ledger.key
    ledger.rotate(bounded=False)
    ledger.run()
    _forge_run(ledger, old)
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"), "--public-key", pem(tmp_path, ledger.key))
    assert code == 0, out  # nothing bounds the old key: what the warning is for
    assert f"{chain_key(old)} (retired, no bound)" in out[0]
    assert f"WARNING: key {chain_key(old)} is retired without a bound" in out[0]


@pytest.mark.parametrize("fields", [{"retired_after_seq": "2"}, {"retired_after_seq": -1}, {"retired_after_seq": True},
                                    {"retired_at": "yesterday"}, {"retired_at": "2026-11-30T09:00:00"},
                                    {"retired_at": 5}])
def test_a_malformed_bound_makes_the_key_set_unusable(tmp_path, capsys, fields):
    from warrant_verify.keys import KeySetError, load_key_set

    ledger, _ = _rotated_and_stolen(tmp_path)
    document = ledger.key_document()
    document["keys"][0].update(fields)
    with pytest.raises(KeySetError, match="retired_"):
        load_key_set(document)
    on_active = ledger.key_document()
    on_active["keys"][1]["retired_after_seq"] = 9
    with pytest.raises(KeySetError, match="not retired"):
        load_key_set(on_active)
    (tmp_path / "keys.json").write_text(json.dumps(document))
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"), "--public-key", tmp_path / "keys.json")
    assert code == 1 and out[0].startswith(f"{tmp_path / 'keys.json'}: file: key #1: retired_")


def test_a_key_listed_twice_keeps_the_tighter_bound_and_so_do_two_key_sets():
    from warrant_verify.keys import load_key_set, merge_key_sets, retirement_of

    ledger = standard_ledger(3)
    ledger.rotate()
    document = ledger.key_document()
    loose = dict(document["keys"][0], retired_after_seq=9, retired_at="2027-01-01T00:00:00Z")
    kid = loose["key_id"]
    assert retirement_of(load_key_set({"keys": [loose, *document["keys"]]})[kid]).after_seq == 3
    relisted_active = {k: v for k, v in loose.items() if not k.startswith("retired_")} | {"status": "active"}
    assert retirement_of(load_key_set({"keys": [document["keys"][0], relisted_active]})[kid]).after_seq == 3
    merged = merge_key_sets(load_key_set(document), load_key_set({"keys": [relisted_active]}))
    assert retirement_of(merged[kid]).after_seq == 3


def test_two_workers_hold_receipts_to_a_retired_keys_bound_as_one_does(monkeypatch):
    from warrant_verify.keys import load_key_set

    ledger = standard_ledger(3)
    old = ledger.key
    ledger.rotate()
    for _ in range(20):
        _forge_run(ledger, old)
    keys = load_key_set(ledger.key_document())
    monkeypatch.setattr(chain, "PARALLEL_THRESHOLD", 5)
    monkeypatch.setattr(chain, "_CHUNK", 4)
    one = chain.verify_receipts(ledger.receipts, keys=keys, workers=1)
    two = chain.verify_receipts(ledger.receipts, keys=keys, workers=2)
    assert len(one.failures) == 20 and all("retired after #3" in str(failure) for failure in one.failures)
    assert sorted(map(str, two.failures)) == sorted(map(str, one.failures))


def test_a_different_public_key_fails_the_manifest(tmp_path, capsys, ledger):
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"), "--public-key",
                       pem(tmp_path, Ed25519PrivateKey.generate()))
    assert code == 1
    assert out[0] == f"manifest.json: signature: signed by unknown key '{chain_key(ledger.key)}'"
    assert len(out) == 1 + 4 + 4 and all("signed by unknown key" in line for line in out)


def test_a_bundle_resigned_by_an_impostor_passes_only_without_the_real_key(tmp_path, capsys, ledger):
    impostor = Ed25519PrivateKey.generate()
    forged = Ledger(impostor)
    for body in [json.loads(record["body"]) for record in ledger.receipts]:
        forged.seal(body)
    forged.events, forged.approvals, forged.runs = ledger.events, ledger.approvals, ledger.runs
    bundle = write_bundle(forged, tmp_path / "bundle")
    assert verify(capsys, bundle)[0] == 0  # self-consistent, so only an out-of-band key tells
    code, out = verify(capsys, bundle, "--public-key", pem(tmp_path, ledger.key))
    assert code == 1 and out[0] == f"manifest.json: signature: signed by unknown key '{chain_key(impostor)}'"
    # keys.json is vouched for by nothing trusted, so every receipt and checkpoint is unknown-signed too
    assert sum(f"signed by unknown key '{chain_key(impostor)}'" in line for line in out) == 1 + 4 + 4
