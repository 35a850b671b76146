"""The verifier on an auditor's machine: a fresh venv with only cryptography, and only warrant_verify/
of Warrant's code beside it (tests/evidence/fresh_venv.py builds it and asserts Django is absent)."""

import pytest

from tests.evidence.bundles import write_bundle, write_witness
from tests.evidence.fresh_venv import fresh_verifier


@pytest.mark.slow
def test_the_verifier_runs_in_a_fresh_venv_with_only_cryptography(tmp_path, ledger):
    run = fresh_verifier(tmp_path)
    bundle = write_bundle(ledger, tmp_path / "bundle.zip", as_zip=True)
    witness = write_witness(ledger, tmp_path / "witness.jsonl")
    intact = run(bundle, "--witness", witness)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert intact.stdout.startswith("intact: bundle.zip: 4 receipts")
    ledger.approvals[0]["decided_by"] = "mallory"
    tampered = run(write_bundle(ledger, tmp_path / "tampered", as_zip=False), "--witness", witness)
    assert tampered.returncode == 1
    assert tampered.stdout.startswith(f"approvals.jsonl: approval {ledger.approvals[0]['id']}: decided_by differ")
    assert "Traceback" not in tampered.stderr
