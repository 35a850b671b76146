"""Receipts: the one writer of the hash chain, and its verifier.

hash = sha256(prev_hash + body), body = canonical JSON, seq gap-free from 1. Sealing happens in
the same transaction that moves the run to its terminal status.
"""

import hashlib
import json
from dataclasses import dataclass

from django.db import connection, transaction

from runs.models import ApprovalRequest, Receipt, Run

GENESIS = "0" * 64
_CHAIN_LOCK = 0x57415252  # "WARR": the advisory lock that serialises appends on PostgreSQL


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, body: str) -> str:
    return sha256(prev_hash + body)


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def receipt_body(run: Run) -> dict:
    state, snapshot = run.state, run.snapshot
    fired, seen = [], set()
    for decision in state.get("fired", []):
        key = (decision["policy_id"], decision["version"])
        if key not in seen:
            seen.add(key)
            fired.append({"id": decision["policy_id"], "version": decision["version"], "type": decision["type"]})
    skills = {s["name"]: s for s in snapshot.get("skills", [])}
    # Only a run that parked has approval requests (runs from before `parks` was counted are asked).
    requests = ApprovalRequest.objects.filter(run=run) if state.get("parks", 1) else ApprovalRequest.objects.none()
    approvals = [
        {
            "id": str(a.id),
            "tool": a.tool,
            "arguments_sha256": a.arguments_sha256,
            "approver_role": a.approver_role.name,
            "decision": a.status,
            "decided_by": a.decided_by.get_username() if a.decided_by_id else None,
            "decided_at": _iso(a.decided_at),
        }
        for a in requests.select_related("approver_role", "decided_by").order_by("created_at", "id")
    ]
    wall_ms = int((run.finished_at - run.started_at).total_seconds() * 1000) if run.started_at and run.finished_at else 0
    return {
        "run_id": str(run.id),
        "agent": {
            "slug": snapshot["agent"]["slug"],
            "version": snapshot["agent"]["version"],
            "hash": snapshot["agent"]["sha256"],
        },
        "caller": {"username": snapshot["caller"]["username"], "roles": snapshot["caller"]["roles"]},
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "error": run.error or None,
        "tainted": run.tainted,
        "input_sha256": sha256(run.input),
        "output_sha256": sha256(run.output),
        "policy_snapshot_sha256": run.policy_snapshot_sha256,
        "policies_fired": fired,
        "skills_used": [
            {"name": n, "version": skills[n]["version"], "sha256": skills[n]["sha256"]}
            for n in state.get("active_skills", []) if n in skills
        ],
        "model_calls": [_model_call(c) for c in state.get("model_calls", [])],
        "tool_calls": [
            {k: c[k] for k in ("name", "ok", "code", "duration_ms", "approval_id")} for c in state.get("tool_log", [])
        ],
        "approvals": approvals,
        "totals": {
            "llm_calls": run.llm_calls,
            "tool_calls": run.tool_calls,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "wall_ms": wall_ms,
        },
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


# Recorded since real backends arrived; runs from before have none of them.
_MODEL_CALL_EXTRAS = {"requested_backend": None, "profile": None, "cache_read_tokens": 0, "cache_creation_tokens": 0,
                      "attempts": 1, "outcome": "ok"}


def _model_call(call: dict) -> dict:
    """Requested and actual model and backend of one call, so a fallback is visible in the receipt."""
    body = {k: call[k] for k in ("requested_model", "actual_model", "backend", "input_tokens", "output_tokens",
                                 "latency_ms")}
    return body | {k: call.get(k, default) for k, default in _MODEL_CALL_EXTRAS.items()}


def _lock_chain() -> None:
    # SQLite serialises writers already (IMMEDIATE transactions); PostgreSQL needs the lock, and
    # the unique seq and hash columns reject a fork even if it were skipped.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])


def receipt_seal(*, run: Run) -> Receipt:
    """Append the receipt of a terminal run to the chain. Call inside the terminal transaction."""
    assert transaction.get_connection().in_atomic_block, "receipts are sealed inside the run's final transaction"
    # Sealed once: only the move to a terminal status calls this, and a run leaves no terminal
    # status. A second seal would break the one-to-one column and roll the transaction back.
    _lock_chain()
    last = Receipt.objects.order_by("-seq").only("seq", "hash").first()
    prev_hash = last.hash if last else GENESIS
    body = canonical(receipt_body(run))
    return Receipt.objects.create(
        run=run, seq=(last.seq + 1) if last else 1, prev_hash=prev_hash, hash=chain_hash(prev_hash, body), body=body
    )


@dataclass(frozen=True)
class Verification:
    valid: bool
    checked: int
    receipt: str | None = None
    seq: int | None = None
    reason: str = ""


def _check(receipt: Receipt, expected_prev: str, expected_seq: int) -> str:
    if receipt.seq != expected_seq:
        return f"sequence gap: expected #{expected_seq}, found #{receipt.seq}"
    if receipt.prev_hash != expected_prev:
        return "prev_hash does not match the previous receipt's hash"
    if chain_hash(receipt.prev_hash, receipt.body) != receipt.hash:
        return "hash does not match the body: the body was altered"
    try:
        body = json.loads(receipt.body)
    except ValueError:
        return "body is not JSON"
    if canonical(body) != receipt.body:
        return "body is not in canonical form"
    if body.get("run_id") != str(receipt.run_id):
        return "body names another run"
    return ""


def receipt_verify_chain(*, upto_seq: int | None = None) -> Verification:
    """Recompute the chain from the first receipt; name the first one that does not match."""
    expected_prev, expected_seq, checked = GENESIS, 1, 0
    queryset = Receipt.objects.order_by("seq")
    if upto_seq is not None:
        queryset = queryset.filter(seq__lte=upto_seq)
    # Plain rows, not model instances: building 100,000 of them cost more than the hashing.
    rows = queryset.values_list("id", "run_id", "seq", "prev_hash", "hash", "body", named=True)
    for receipt in rows.iterator(chunk_size=2000):
        reason = _check(receipt, expected_prev, expected_seq)
        if reason:
            return Verification(False, checked, str(receipt.id), receipt.seq, reason)
        checked += 1
        expected_prev, expected_seq = receipt.hash, receipt.seq + 1
    return Verification(True, checked)


def receipt_verify(*, receipt: Receipt) -> Verification:
    """Verify one receipt: its own hash, and the chain up to it."""
    result = receipt_verify_chain(upto_seq=receipt.seq)
    if result.valid:
        return Verification(True, result.checked, str(receipt.id), receipt.seq, "hash chain intact up to this receipt")
    return result
