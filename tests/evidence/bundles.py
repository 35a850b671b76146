"""Synthetic but correctly signed evidence, built with warrant_verify's own primitives.

`Ledger` plays the database (receipts, events, approvals, runs, checkpoints, the witness) and
`write_bundle` plays an honest exporter over whatever the ledger holds. Tamper tests edit the
ledger the way an insider edits tables (the exporter then signs a manifest over the lie) or
edit the written files the way someone edits a bundle in transit.
"""

import base64
import hashlib
import json
import uuid
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from warrant_verify.jcs import canonicalize
from warrant_verify.keys import Retirement, key_id, public_key_document
from warrant_verify.messages import (GENESIS, checkpoint_message, event_hash, manifest_message, receipt_hash,
                                     receipt_message)

EPOCH = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sign(private_key: Ed25519PrivateKey, message: bytes) -> str:
    return base64.b64encode(private_key.sign(message)).decode("ascii")


class Ledger:
    def __init__(self, key: Ed25519PrivateKey | None = None):
        self.keys = [key or Ed25519PrivateKey.generate()]
        self.retired: dict[str, Retirement | None] = {}
        self.receipts: list[dict] = []
        self.events: list[dict] = []
        self.approvals: list[dict] = []
        self.runs: list[dict] = []
        self.checkpoints: list[dict] = []
        self.witness: list[dict] = []
        self.ticks = 0

    @property
    def key(self) -> Ed25519PrivateKey:
        return self.keys[-1]

    def now(self) -> str:
        self.ticks += 1
        return iso(EPOCH + timedelta(seconds=self.ticks))

    def rotate(self, *, bounded: bool = True) -> Ed25519PrivateKey:
        """The active key retired at the head, as `receipt_keys rotate` does (or, not bounded, as
        key sets were written before bounds existed)."""
        bound = Retirement(after_seq=len(self.receipts), at=self.now()) if bounded else None
        self.retired[key_id(self.key.public_key())] = bound
        self.keys.append(Ed25519PrivateKey.generate())
        return self.key

    def run(self, *, approvals: int = 1, events: int = 4, status: str = "succeeded", seal: bool = True) -> str:
        """A terminal run with its events and approvals; sealed (receipt + checkpoint) unless told not."""
        run_id = str(uuid.uuid4())
        text_in, text_out = f"refund order {run_id[:8]}", f"refunded {run_id[:8]}"
        self.runs.append({"id": run_id, "status": status, "input_sha256": sha256_text(text_in),
                          "output_sha256": sha256_text(text_out), "has_receipt": seal})
        head = GENESIS
        for n in range(1, events + 1):
            kind, data = ("model.call", {"model": "scripted", "tokens": 40 + n}) if n % 2 else \
                ("tool.call", {"tool": "lookup", "arguments": {"order": n, "note": "caf\u00e9 \U0001F4E6"}})
            head = event_hash(prev=head, seq=n, step=(n + 1) // 2, kind=kind, data=data)
            self.events.append({"run_id": run_id, "seq": n, "step": (n + 1) // 2, "kind": kind, "data": data,
                                "hash": head})
        sealed = []
        for n in range(approvals):
            row = {"id": str(uuid.uuid4()), "run_id": run_id, "tool": "refund",
                   "arguments_sha256": sha256_text(f"{run_id}{n}"), "approver_role": "secops", "status": "approved",
                   "decided_by": "alice", "decided_via": "session", "decided_at": self.now(), "reason": "checked"}
            self.approvals.append(row)
            sealed.append({"id": row["id"], "tool": row["tool"], "arguments_sha256": row["arguments_sha256"],
                           "approver_role": row["approver_role"], "decision": row["status"],
                           "decided_by": row["decided_by"], "decided_via": row["decided_via"],
                           "decided_at": row["decided_at"], "reason": row["reason"]})
        if seal:
            self.seal(self.body(run_id, status=status, approvals=sealed, events=events, head=head))
        return run_id

    def body(self, run_id: str, *, status: str, approvals: list, events: int, head: str) -> dict:
        run = next(run for run in self.runs if run["id"] == run_id)
        return {
            "v": 2, "run_id": run_id, "agent": {"slug": "refunds", "version": 3, "hash": "a" * 64},
            "caller": {"username": "operator", "roles": ["operator"]}, "status": status, "stop_reason": "final",
            "error": "", "tainted": False, "input_sha256": run["input_sha256"], "output_sha256": run["output_sha256"],
            "policy_snapshot_sha256": "b" * 64, "policies_fired": [{"id": "p1", "version": 2, "type": "tool_allow"}],
            "skills_used": [], "model_calls": [{"model": "scripted", "input_tokens": 120, "output_tokens": 40}],
            "tool_calls": [{"tool": "lookup", "status": "ok"}], "approvals": approvals,
            "trace": {"events": events, "head": head}, "totals": {"tokens": 160, "cost_usd": 0.0125},
            "started_at": self.now(), "finished_at": self.now(),
        }

    def seal(self, body: dict, *, key: Ed25519PrivateKey | None = None) -> dict:
        key = key or self.key
        prev = self.receipts[-1]["hash"] if self.receipts else GENESIS
        seq = len(self.receipts) + 1
        text = canonicalize(body).decode("utf-8")
        record = {"id": str(uuid.uuid4()), "run_id": body["run_id"], "seq": seq, "prev_hash": prev,
                  "hash": receipt_hash(prev, text), "body": text, "key_id": key_id(key.public_key()),
                  "created_at": self.now()}
        record["signature"] = sign(key, receipt_message(seq=seq, prev_hash=prev, hash=record["hash"],
                                                        key_id=record["key_id"], run_id=record["run_id"]))
        self.receipts.append(record)
        checkpoint = self.checkpoint(seq, record["hash"], key=key)
        self.checkpoints.append(checkpoint)
        self.witness.append(checkpoint)
        return record

    def checkpoint(self, seq: int, head: str, *, key: Ed25519PrivateKey | None = None) -> dict:
        key = key or self.key
        checkpoint = {"v": 1, "kind": "warrant.checkpoint", "seq": seq, "head": head, "at": self.now(),
                      "key_id": key_id(key.public_key())}
        checkpoint["signature"] = sign(key, checkpoint_message(checkpoint))
        return checkpoint

    def rechain(self, start: int = 0) -> None:
        """What an insider without the key does after an edit: renumber and rehash, keep old signatures."""
        for index in range(start, len(self.receipts)):
            record = self.receipts[index]
            record["seq"] = index + 1
            record["prev_hash"] = self.receipts[index - 1]["hash"] if index else GENESIS
            record["hash"] = receipt_hash(record["prev_hash"], record["body"])

    def key_document(self) -> dict:
        entries = []
        for key in self.keys:
            kid = key_id(key.public_key())
            entries.append((key.public_key(), "retired", self.retired[kid]) if kid in self.retired
                           else (key.public_key(), "active"))
        return public_key_document(entries)


def jsonl(rows) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n" for row in rows)


def write_bundle(ledger: Ledger, path: Path, *, period_to: str | None = None, as_zip: bool = False,
                 key: Ed25519PrivateKey | None = None) -> Path:
    """An honest export of everything in the ledger, manifest signed by the ledger's active key."""
    key = key or ledger.key
    receipts = ledger.receipts
    files = {
        "receipts.jsonl": jsonl(receipts),
        "events.jsonl": jsonl(ledger.events),
        "checkpoints.jsonl": jsonl(ledger.checkpoints),
        "approvals.jsonl": jsonl(ledger.approvals),
        "policies.jsonl": jsonl([{"id": "p1", "version": 2, "type": "tool_allow", "rule": {"tool": "lookup"}}]),
        "runs.jsonl": jsonl(ledger.runs),
        "keys.json": json.dumps(ledger.key_document(), indent=2).encode("utf-8"),
        "summary.html": b"<!doctype html><title>Evidence</title><p>%d receipts</p>\n" % len(receipts),
    }
    head = receipts[-1] if receipts else None
    manifest = {
        "v": 1, "kind": "warrant.evidence-bundle", "created_at": ledger.now(),
        "period": {"from": None, "to": period_to},
        "chain": {"first_seq": receipts[0]["seq"] if receipts else 1,
                  "last_seq": head["seq"] if head else 0,
                  "start_prev_hash": receipts[0]["prev_hash"] if receipts else GENESIS,
                  "head_seq": head["seq"] if head else 0, "head_hash": head["hash"] if head else GENESIS},
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
        "key_id": key_id(key.public_key()),
    }
    manifest["signature"] = sign(key, manifest_message(manifest))
    files["manifest.json"] = json.dumps(manifest, indent=2).encode("utf-8")
    if as_zip:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        return path
    path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path


def write_witness(ledger: Ledger, path: Path) -> Path:
    path.write_bytes(jsonl(ledger.witness))
    return path


def standard_ledger(runs: int = 4) -> Ledger:
    ledger = Ledger()
    for n in range(runs):
        ledger.run(approvals=n % 2 + 1)
    return ledger
