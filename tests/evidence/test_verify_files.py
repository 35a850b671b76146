"""Damaged and hostile files: an edited byte, bad JSON, a missing or extra file, unsafe or inflating zips,
random damage and any JSON type in any field are reported, never raised.

Editing the written files models a bundle edited in transit, after the export signed it.
"""

import shutil
import warnings
import zipfile

import pytest

from tests.evidence.bundles import jsonl, standard_ledger, write_bundle
from tests.evidence.verifying import verify
from warrant_verify.archive import BUNDLE_FILES
from warrant_verify.jcs import CanonicalizationError


@pytest.mark.parametrize("name", BUNDLE_FILES)
def test_one_byte_changed_in_any_file_fails_naming_that_file(tmp_path, capsys, ledger, name):
    bundle = write_bundle(ledger, tmp_path / "bundle")
    data = bytearray((bundle / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (bundle / name).write_bytes(bytes(data))
    code, out = verify(capsys, bundle)
    assert code == 1
    assert any(line.startswith(f"{name}: ") for line in out), out


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


def test_jsonl_helper_round_trips():
    assert jsonl([{"a": 1}]) == b'{"a": 1}\n'
