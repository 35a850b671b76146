"""The offline verifier (python -m warrant_verify) against intact and tampered bundles.

Tampering with the ledger models an insider editing tables before an honest export (which then
signs a manifest over the lie); tampering with written files models an edited bundle.
"""

import json
import shutil
import warnings
import zipfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.evidence.bundles import Ledger, jsonl, standard_ledger, write_bundle, write_witness
from warrant_verify import chain
from warrant_verify.__main__ import main
from warrant_verify.archive import BUNDLE_FILES
from warrant_verify.jcs import CanonicalizationError, canonicalize
from warrant_verify.messages import GENESIS, event_hash


def verify(capsys, path, *args) -> tuple[int, list[str]]:
    code = main([str(path), *map(str, args)])
    return code, capsys.readouterr().out.splitlines()


def pem(tmp_path, key: Ed25519PrivateKey, name="public.pem"):
    path = tmp_path / name
    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


@pytest.fixture
def ledger():
    return standard_ledger()


def test_an_intact_bundle_passes_as_a_directory_and_as_a_zip(tmp_path, capsys, ledger):
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle"))
    assert code == 0 and len(out) == 1
    assert out[0].startswith("intact: bundle: 4 receipts (seq 1-4), 4 runs") and "keys.json inside the bundle" in out[0]
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True),
                       "--public-key", pem(tmp_path, ledger.key), "--witness", write_witness(ledger, tmp_path / "w"))
    assert code == 0, out
    assert "trusted from --public-key" in out[0] and "4 checkpoints in w" in out[0]


@pytest.mark.parametrize("name", BUNDLE_FILES)
def test_one_byte_changed_in_any_file_fails_naming_that_file(tmp_path, capsys, ledger, name):
    bundle = write_bundle(ledger, tmp_path / "bundle")
    data = bytearray((bundle / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (bundle / name).write_bytes(bytes(data))
    code, out = verify(capsys, bundle)
    assert code == 1
    assert any(line.startswith(f"{name}: ") for line in out), out


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


def chain_key(private_key):
    from warrant_verify.keys import key_id

    return key_id(private_key.public_key())


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


def test_bad_json_lines_are_failures_not_tracebacks(tmp_path, capsys, ledger):
    bundle = write_bundle(ledger, tmp_path / "bundle")
    with open(bundle / "receipts.jsonl", "ab") as stream:
        stream.write(b'{"seq": 5, "truncated\n[1, 2]\n\xff\xfe\n')
    with open(bundle / "witness.jsonl", "wb") as stream:
        stream.write(b"not json\n")
    shutil.move(bundle / "witness.jsonl", tmp_path / "witness.jsonl")
    code, out = verify(capsys, bundle, "--witness", tmp_path / "witness.jsonl")
    assert code == 1
    assert "receipts.jsonl: line 6: not a JSON object" in out
    assert any(line.startswith("receipts.jsonl: line 5: not JSON") for line in out)
    assert any(line.startswith("receipts.jsonl: line 7: not JSON") for line in out)
    assert any(line.startswith("witness.jsonl: line 1: not JSON") for line in out)


def test_a_missing_or_extra_file_fails(tmp_path, capsys, ledger):
    bundle = write_bundle(ledger, tmp_path / "bundle")
    (bundle / "policies.jsonl").unlink()
    (bundle / "notes.txt").write_text("hello")
    code, out = verify(capsys, bundle)
    assert code == 1
    assert "policies.jsonl: file: missing from the bundle" in out
    assert "notes.txt: file: not a file of the evidence format (extra file)" in out


@pytest.mark.parametrize("entry", ["../evil.txt", "/etc/passwd", "sub/manifest.json", "..\\evil.txt", "manifest.json"])
def test_unsafe_zips_are_refused_without_extracting(tmp_path, capsys, ledger, entry):
    path = write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True)
    with zipfile.ZipFile(path, "a") as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate, which is the point
        archive.writestr(entry, b"x")  # "manifest.json" again: a duplicate entry
    code, out = verify(capsys, path)
    assert code == 1 and len(out) == 1 and out[0].startswith("bundle.zip: bundle: entry ")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path.parent / "evil.txt").exists()


def test_a_zip_declaring_absurd_sizes_is_refused(tmp_path, capsys, ledger, monkeypatch):
    from warrant_verify import archive

    path = write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True)
    monkeypatch.setattr(archive, "MAX_FILE_BYTES", 1000)  # the real limit is GiBs; the rule is what is tested
    code, out = verify(capsys, path)
    assert code == 1 and "past the size limit" in out[0]


def test_a_zip_that_inflates_past_its_declared_size_is_refused(tmp_path, capsys):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("receipts.jsonl", b"\n" * 200_000)
    data = bytearray(path.read_bytes())
    # Lower the declared size in both headers, as a zip bomb would, keeping the deflated stream.
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = (10).to_bytes(4, "little")
    data[22:26] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    code, out = verify(capsys, path)
    assert code == 1 and len(out) == 1 and out[0].startswith("bomb.zip: bundle: entry 'receipts.jsonl'")


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


def test_two_workers_find_what_one_finds(ledger, monkeypatch):
    for _ in range(36):
        ledger.run(approvals=0, events=1)
    keys = {chain_key(ledger.key): ledger.key.public_key()}
    records = [dict(record) for record in ledger.receipts]
    for index in (3, 17, 38):
        records[index]["signature"] = records[0]["signature"]
    records[25]["key_id"] = "0" * 16
    monkeypatch.setattr(chain, "PARALLEL_THRESHOLD", 10)
    monkeypatch.setattr(chain, "_CHUNK", 7)
    one = chain.verify_receipts(records, keys=keys, workers=1)
    two = chain.verify_receipts(records, keys=keys, workers=2)
    assert len(one.failures) == 4
    assert sorted(map(str, two.failures)) == sorted(map(str, one.failures))
    assert (two.head_seq, two.head_hash, two.checked) == (one.head_seq, one.head_hash, 40)


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


def test_jsonl_helper_round_trips():
    assert jsonl([{"a": 1}]) == b'{"a": 1}\n'


@pytest.mark.slow
def test_the_verifier_runs_in_a_fresh_venv_with_only_cryptography(tmp_path, ledger):
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pin = re.search(r"^cryptography==\S+", (root / "requirements.txt").read_text(), re.MULTILINE).group(0)
    venv = tmp_path / "venv"
    # Without pip inside (bootstrapping it is most of the time); our pip installs into it instead.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--disable-pip-version-check", pin], check=True, timeout=240)
    # Only the verifier's own directory, next to nothing of Warrant's: any other import would fail.
    shutil.copytree(root / "warrant_verify", tmp_path / "auditor" / "warrant_verify")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    bundle = write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True)
    witness = write_witness(ledger, tmp_path / "witness.jsonl")

    def run(*args):
        return subprocess.run([str(python), "-m", "warrant_verify", *map(str, args)], cwd=tmp_path / "auditor",
                              env=env, capture_output=True, text=True, timeout=120)

    isolated = subprocess.run([str(python), "-c", "import django"], cwd=tmp_path / "auditor", env=env,
                              capture_output=True)
    assert isolated.returncode != 0  # Django is not there, so nothing can lean on it
    intact = run(bundle, "--witness", witness)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert intact.stdout.startswith("intact: bundle.zip: 4 receipts")
    ledger.approvals[0]["decided_by"] = "mallory"
    tampered = run(write_bundle(ledger, tmp_path / "tampered", as_zip=False), "--witness", witness)
    assert tampered.returncode == 1
    assert tampered.stdout.startswith(f"approvals.jsonl: approval {ledger.approvals[0]['id']}: decided_by differ")
    assert "Traceback" not in tampered.stderr


def test_an_empty_bundle_passes(tmp_path, capsys):
    ledger = Ledger()
    code, out = verify(capsys, write_bundle(ledger, tmp_path / "empty"))
    assert code == 0 and out[0].startswith("intact: empty: 0 receipts (seq 1-0), 0 runs"), out


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


def test_random_damage_anywhere_is_reported_never_raised(tmp_path, capsys, ledger):
    import random

    rng = random.Random(16)
    pristine = write_bundle(ledger, tmp_path / "pristine")
    originals = {name: (pristine / name).read_bytes() for name in BUNDLE_FILES}
    bundle = tmp_path / "bundle"
    shutil.copytree(pristine, bundle)
    for _ in range(150):
        name = rng.choice(BUNDLE_FILES)
        data = bytearray(originals[name])
        position = rng.randrange(len(data))
        action = rng.random()
        if action < 0.5:
            data[position] = rng.choice(b'{}[]",:0123456789abcdef\n\\ \xff')
        elif action < 0.75:
            del data[position:position + rng.randint(1, 40)]
        else:
            data[position:position] = rng.choice([b'{"seq": 1e400}', b"[" * 5000, b'"\\ud800"', b"\n\n", b"null"])
        if bytes(data) == originals[name]:
            continue  # the byte drawn was the one already there
        (bundle / name).write_bytes(bytes(data))
        code, out = verify(capsys, bundle)
        assert code == 1 and any(line.startswith(f"{name}: ") for line in out), (name, bytes(data[:80]), out)
        (bundle / name).write_bytes(originals[name])


def test_any_field_of_any_row_set_to_any_json_type_is_reported_never_raised(tmp_path, capsys):
    import copy

    base = standard_ledger(2)
    values = [None, [], {"a": [1]}, "", 10**30, -1, 1.5, True, "x" * 70, 2**53]
    tables = ("receipts", "events", "approvals", "runs", "checkpoints")
    for table in tables:
        for field in list(getattr(base, table)[0]):
            for value in values:
                ledger = copy.deepcopy(base)
                getattr(ledger, table)[0][field] = value
                try:
                    bundle = write_bundle(ledger, tmp_path / f"{table}-{field}-{values.index(value)}")
                except CanonicalizationError:
                    continue  # the manifest would carry it (a seq past 2**53): no exporter can sign that
                code, out = verify(capsys, bundle)
                assert code in (0, 1) and out
                # Unsigned by the format: a receipt's id and created_at (labels; seq is its identity).
                unsigned = field in ("created_at", "has_receipt") or (field == "id" and table == "receipts"
                                                                       and isinstance(value, str))
                if table != "checkpoints" and not unsigned and value != "":
                    assert code == 1, (table, field, value, out)


def test_two_workers_check_traces_as_one_does(tmp_path, capsys, monkeypatch):
    ledger = standard_ledger(12)
    for index in (1, 7):
        run_id = ledger.receipts[index]["run_id"]
        ledger.events.remove([e for e in ledger.events if e["run_id"] == run_id][2])
    bundle = write_bundle(ledger, tmp_path / "bundle")
    code, serial = verify(capsys, bundle, "--workers", 1)
    monkeypatch.setattr(chain, "TRACE_PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(chain, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(chain, "_CHUNK", 5)
    code_two, shared = verify(capsys, bundle, "--workers", 2)
    assert code == code_two == 1 and len(serial) == 8  # 2 runs x (seq, link, count, head)
    assert sorted(shared) == sorted(serial)


def test_a_bad_checkpoint_in_both_places_is_named_in_both(tmp_path, capsys, ledger):
    ledger.checkpoints[1]["signature"] = ledger.checkpoints[0]["signature"]  # the witness holds the same dict
    bundle = write_bundle(ledger, tmp_path / "bundle")
    code, out = verify(capsys, bundle, "--witness", write_witness(ledger, tmp_path / "witness.jsonl"))
    reason = f"signature does not verify with key {chain_key(ledger.key)}"
    assert code == 1 and out == [f"checkpoints.jsonl: checkpoint 2: {reason}", f"witness.jsonl: checkpoint 2: {reason}"]
