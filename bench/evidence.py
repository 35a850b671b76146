"""Offline verification speed: N signed receipts (100,000 by default) built in memory with
warrant_verify's primitives, verified with one and two workers, and what the time is made of.

    python -m bench.evidence [N]

Standalone: no Django, no database; only warrant_verify and cryptography.
"""

import base64
import hashlib
import json
import os
import resource
import sys
import time
import uuid

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from warrant_verify import jcs
from warrant_verify.chain import check_receipt, verify_receipts
from warrant_verify.keys import key_id
from warrant_verify.messages import GENESIS, receipt_hash, receipt_message

RUN_PLACEHOLDER = "00000000-0000-4000-8000-000000000000"


def body_template() -> str:
    """A v2 body shaped like a sealed run's: one approval, a few calls, the trace head."""
    body = {
        "v": 2, "run_id": RUN_PLACEHOLDER,
        "agent": {"slug": "refunds", "version": 3, "hash": hashlib.sha256(b"agent").hexdigest()},
        "caller": {"username": "operator", "roles": ["operator"]}, "status": "succeeded", "stop_reason": "final",
        "error": None, "tainted": False, "input_sha256": hashlib.sha256(b"in").hexdigest(),
        "output_sha256": hashlib.sha256(b"out").hexdigest(),
        "policy_snapshot_sha256": hashlib.sha256(b"policies").hexdigest(),
        "policies_fired": [{"id": str(uuid.uuid4()), "version": 2, "type": "tool_allow"}],
        "skills_used": [{"name": "lookup", "version": 1, "sha256": hashlib.sha256(b"skill").hexdigest()}],
        "model_calls": [{"model": "scripted", "input_tokens": 812, "output_tokens": 64, "estimated": True}] * 2,
        "tool_calls": [{"name": "lookup_order", "ok": True, "code": "", "duration_ms": 3, "approval_id": None},
                       {"name": "refund", "ok": True, "code": "", "duration_ms": 5, "approval_id": str(uuid.uuid4())}],
        "approvals": [{"id": str(uuid.uuid4()), "tool": "refund", "arguments_sha256": hashlib.sha256(b"a").hexdigest(),
                       "approver_role": "secops", "decision": "approved", "decided_by": "alice",
                       "decided_via": "session", "decided_at": "2026-12-01T10:00:00.000000Z", "reason": "checked"}],
        "trace": {"events": 14, "head": hashlib.sha256(b"trace").hexdigest()},
        "totals": {"llm_calls": 2, "tool_calls": 2, "input_tokens": 1624, "output_tokens": 128, "wall_ms": 1312},
        "started_at": "2026-12-01T10:00:00.000000Z", "finished_at": "2026-12-01T10:00:01.312000Z",
    }
    return jcs.canonicalize(body).decode("utf-8")


def build(n: int) -> tuple[list[dict], dict]:
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    template = body_template()
    records, prev = [], GENESIS
    for seq in range(1, n + 1):
        run_id = str(uuid.uuid4())
        body = template.replace(RUN_PLACEHOLDER, run_id)  # a uuid for a uuid: still canonical
        digest = receipt_hash(prev, body)
        message = receipt_message(seq=seq, prev_hash=prev, hash=digest, key_id=kid, run_id=run_id)
        records.append({"id": str(uuid.uuid4()), "run_id": run_id, "seq": seq, "prev_hash": prev, "hash": digest,
                        "body": body, "key_id": kid, "signature": base64.b64encode(key.sign(message)).decode(),
                        "created_at": "2026-12-01T10:00:01.312000Z"})
        prev = digest
    return records, {kid: key.public_key()}


def breakdown(records: list[dict], keys: dict) -> dict[str, float]:
    """CPU microseconds per receipt of each part of check_receipt, on a sample."""
    public = next(iter(keys.values()))
    signatures = [base64.b64decode(r["signature"]) for r in records]
    parsed = [(r["body"], jcs.loads(r["body"])) for r in records]
    messages = [receipt_message(seq=r["seq"], prev_hash=r["prev_hash"], hash=r["hash"], key_id=r["key_id"],
                                run_id=r["run_id"]) for r in records]

    def clock(work) -> float:
        start = time.process_time()  # CPU, not wall: other work on the machine does not count
        work()
        return (time.process_time() - start) / len(records) * 1e6

    return {
        "Ed25519 verify": clock(lambda: [public.verify(s, m) for s, m in zip(signatures, messages)]),
        "signed message (JCS of 5 fields)": clock(lambda: [receipt_message(
            seq=r["seq"], prev_hash=r["prev_hash"], hash=r["hash"], key_id=r["key_id"], run_id=r["run_id"])
            for r in records]),
        "sha256 chain hash": clock(lambda: [receipt_hash(r["prev_hash"], r["body"]) for r in records]),
        "JSON parse": clock(lambda: [jcs.loads(r["body"]) for r in records]),
        "canonical check of the parsed body": clock(lambda: [jcs.is_canonical(body, value)
                                                             for body, value in parsed]),
        "whole check_receipt": clock(lambda: [check_receipt(r, keys) for r in records]),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    if n > 100_000:
        raise SystemExit("at most 100,000 receipts: the machine is shared")
    started = time.perf_counter()
    records, keys = build(n)
    print(f"built {n} signed receipts in {time.perf_counter() - started:.1f} s "
          f"(body {len(records[0]['body'])} bytes; {os.cpu_count()} CPUs)")
    for part, micros in breakdown(records[:5000], keys).items():
        print(f"  {part:36s} {micros:8.1f} us/receipt")
    figures = {"n": n, "load_before": os.getloadavg()[0]}
    for workers in (1, 2):
        start, cpu = time.perf_counter(), _cpu()
        result = verify_receipts(records, keys=keys, workers=workers)
        elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
        assert not result.failures and result.head_seq == n, result.failures[:3]
        # The machine is shared: CPU time per receipt says what the work costs whatever else runs,
        # and two idle cores would verify at most 2 s of CPU per second.
        per = cpu / n * 1e6
        print(f"workers={workers}: {n} receipts in {elapsed:.2f} s = {n / elapsed:,.0f} receipts/s wall; "
              f"{per:.0f} us CPU per receipt (all processes) = {2e6 / per:,.0f}/s on two idle cores")
        figures[f"workers{workers}"] = {"wall_s": round(elapsed, 2), "per_s": round(n / elapsed),
                                        "cpu_us": round(per, 1)}
    figures["load_after"] = os.getloadavg()[0]
    print(json.dumps(figures))


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
