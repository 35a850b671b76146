"""Verifying in parallel finds exactly what one worker finds."""

from tests.evidence.bundles import standard_ledger, write_bundle
from tests.evidence.verifying import chain_key, verify
from warrant_verify import chain


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
