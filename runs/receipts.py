"""Receipts: the one writer of the hash chain, and its verifier.

hash = sha256(prev_hash + body), body = canonical JSON, seq gap-free from 1. Sealing happens in
the same transaction that moves the run to its terminal status.

What verification proves, and what each check costs (see receipt_verify_chain):
- seq, prev_hash and hash are recomputed for every receipt, from #1: an edited body, hash or
  prev_hash, a missing, duplicated or reordered receipt all break them.
- The body's own checks (canonical JSON, names the receipt's run) need a JSON round trip, about
  ten times the SHA-256 of the body. The sealer runs them once, on the bytes it writes, and marks
  the receipt with `seal` = keyed BLAKE2b(hash, run id) under a key derived from SECRET_KEY. A
  verifier that finds the mark recomputed from the row's own hash and run id knows that those
  exact bytes (the hash matches them: SHA-256 collision resistance) passed those checks for this
  run (only the key's holder can make the mark); no other bytes and no other run can carry it.
  Any receipt without a matching mark (sealed before marks existed, under another key, written or
  rewritten by anything but the sealer, or moved to another run) gets the full checks, as before.
"""

import hashlib
import json
import operator
import uuid
from dataclasses import dataclass
from functools import lru_cache, partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from governance.rows import insert_row
from runs.models import ApprovalRequest, Receipt, ReceiptCheckpoint, Run

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
    columns = ("id", "tool", "arguments_sha256", "approver_role__name", "status",
               f"decided_by__{get_user_model().USERNAME_FIELD}", "decided_at")
    approvals = [
        {"id": str(id_), "tool": tool, "arguments_sha256": digest, "approver_role": role, "decision": status,
         "decided_by": decided_by, "decided_at": _iso(decided_at)}
        for id_, tool, digest, role, status, decided_by, decided_at
        in ApprovalRequest.objects.filter(run=run).order_by("created_at", "id").values_list(*columns)
    ] if state.get("parks", 1) else []
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
                      "tokens_estimated": None, "attempts": 1, "outcome": "ok"}


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


def _seal_key() -> bytes:
    return hashlib.sha256(b"warrant receipt seal\x00" + settings.SECRET_KEY.encode()).digest()


def _mark(key: bytes, hash_: str, run_hex: str) -> str:
    return hashlib.blake2b((hash_ + run_hex).encode(), key=key, digest_size=32).hexdigest()


def _body_reason(body: str, run_id: str) -> str:
    """The checks the hash cannot make: the body is canonical JSON and names this run ("" if so)."""
    try:
        value = json.loads(body)
    except ValueError:
        return "body is not JSON"
    if canonical(value) != body:
        return "body is not in canonical form"
    if not isinstance(value, dict) or value.get("run_id") != run_id:
        return "body names another run"
    return ""


def receipt_seal_mark(*, hash_: str, run_id: uuid.UUID, body: str) -> str:
    """The mark the sealer gives a receipt: only if the body passes its checks ("" otherwise)."""
    if _body_reason(body, str(run_id)):
        return ""
    return _mark(_seal_key(), hash_, run_id.hex)


def receipt_seal(*, run: Run) -> Receipt:
    """Append the receipt of a terminal run to the chain. Call inside the terminal transaction."""
    assert transaction.get_connection().in_atomic_block, "receipts are sealed inside the run's final transaction"
    # Sealed once: only the move to a terminal status calls this, and a run leaves no terminal
    # status. A second seal would break the one-to-one column and roll the transaction back.
    _lock_chain()
    with connection.cursor() as cursor:
        cursor.execute(_head_sql())
        last_seq, prev_hash = cursor.fetchone() or (0, GENESIS)
    body = canonical(receipt_body(run))
    hash_ = chain_hash(prev_hash, body)
    receipt = Receipt(run=run, seq=last_seq + 1, prev_hash=prev_hash, hash=hash_, body=body,
                      seal=receipt_seal_mark(hash_=hash_, run_id=run.id, body=body))
    insert_row(receipt)  # an INSERT, never an update: receipts are append-only
    return receipt


@lru_cache(maxsize=1)
def _head_sql() -> str:
    """The chain's last receipt: its seq and hash."""
    qn, opts = connection.ops.quote_name, Receipt._meta
    seq, hash_ = (qn(opts.get_field(name).column) for name in ("seq", "hash"))
    return f"SELECT {seq}, {hash_} FROM {qn(opts.db_table)} ORDER BY {seq} DESC LIMIT 1"


@dataclass(frozen=True)
class Verification:
    valid: bool
    checked: int
    receipt: str | None = None
    seq: int | None = None
    reason: str = ""
    since: int | None = None  # set when only the receipts after this checkpoint were checked


_CHUNK = 2000


def _uuid_text(value) -> str:
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))
    except (TypeError, ValueError):
        return repr(value)


def _run_hex(run) -> str:
    return run if type(run) is str else run.hex  # SQLite keeps 32 hex digits, PostgreSQL hands out a UUID


_sha256_hex = type(hashlib.sha256()).hexdigest
_blake2b_hex = hashlib.blake2b.hexdigest


def _chunk_intact(rows: list, expected_prev: str, expected_seq: int, key: bytes) -> bool:
    """The receipt-by-receipt checks of _verify for a whole chunk at once, looped in C (map, tuple
    comparison) rather than in Python: True only if every receipt in it passes with its mark."""
    seqs, prevs, hashes, data, runs, seals = zip(*rows)
    if seqs != tuple(range(expected_seq, expected_seq + len(rows))):
        return False
    if prevs[0] != expected_prev or prevs[1:] != hashes[:-1]:
        return False
    if type(data[0]) is str:
        data = map(str.encode, data)
    if tuple(map(_sha256_hex, map(hashlib.sha256, data))) != hashes:
        return False
    if type(runs[0]) is not str:
        runs = map(operator.attrgetter("hex"), runs)
    marked = map(partial(hashlib.blake2b, key=key, digest_size=32), map(str.encode, map(operator.add, hashes, runs)))
    return tuple(map(_blake2b_hex, marked)) == seals


def _receipt_id(seq: int) -> str | None:
    found = Receipt.objects.filter(seq=seq).values_list("id", flat=True).first()
    return str(found) if found else None


def _verify(*, expected_prev: str, expected_seq: int, upto_seq: int | None,
            since: int | None = None) -> tuple[Verification, str]:
    """Walk the chain from expected_seq on, with raw rows read in chunks; name the first receipt that fails.

    Also returns the hash of the last receipt found intact."""
    meta, quote = Receipt._meta, connection.ops.quote_name
    seq_c, prev_c, hash_c, body_c, run_c, seal_c = (
        quote(meta.get_field(name).column) for name in ("seq", "prev_hash", "hash", "body", "run", "seal"))
    # The bytes the hash covers, as bytes straight from the database: no str built and encoded again.
    data = {"sqlite": f"CAST({prev_c} || {body_c} AS BLOB)",
            "postgresql": f"convert_to({prev_c} || {body_c}, 'UTF8')"}.get(connection.vendor, f"{prev_c} || {body_c}")
    sql = f"SELECT {seq_c}, {prev_c}, {hash_c}, {data}, {run_c}, {seal_c} FROM {quote(meta.db_table)} WHERE {seq_c} >= %s"
    params = [expected_seq]
    if upto_seq is not None:
        sql += f" AND {seq_c} <= %s"
        params.append(upto_seq)
    sql += f" ORDER BY {seq_c}"
    key, sha256_, blake2b = _seal_key(), hashlib.sha256, hashlib.blake2b
    checked, reason, seq = 0, "", None
    # A server-side cursor on PostgreSQL, so 100,000 bodies are never all in memory at once.
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while not reason and (rows := cursor.fetchmany(_CHUNK)):
            if _chunk_intact(rows, expected_prev, expected_seq, key):
                checked += len(rows)
                expected_prev, expected_seq = rows[-1][2], rows[-1][0] + 1
                continue
            # Something in this chunk needs a closer look (or has no mark): receipt by receipt.
            for seq, prev_hash, hash_, data, run, seal in rows:
                if type(data) is str:
                    data = data.encode()
                if seq != expected_seq:
                    reason = f"sequence gap: expected #{expected_seq}, found #{seq}"
                elif prev_hash != expected_prev:
                    reason = "prev_hash does not match the previous receipt's hash"
                elif sha256_(data).hexdigest() != hash_:
                    reason = "hash does not match the body: the body was altered"
                elif not seal or seal != blake2b((hash_ + _run_hex(run)).encode(), key=key, digest_size=32).hexdigest():
                    # prev_hash matched a 64-digit hash, so the body starts at byte 64
                    reason = _body_reason(bytes(data[64:]).decode(), _uuid_text(run))
                if reason:
                    break
                checked += 1
                expected_prev, expected_seq = hash_, seq + 1
    if reason:
        return Verification(False, checked, _receipt_id(seq), seq, reason, since), expected_prev
    return Verification(True, checked, since=since), expected_prev


def receipt_verify_chain(*, upto_seq: int | None = None) -> Verification:
    """Recompute the chain from the first receipt; name the first one that does not match.

    A whole chain found intact becomes the checkpoint receipt_verify_since_checkpoint starts from."""
    result, last_hash = _verify(expected_prev=GENESIS, expected_seq=1, upto_seq=upto_seq)
    if result.valid and upto_seq is None and result.checked:
        if not ReceiptCheckpoint.objects.filter(seq__gte=result.checked).exists():
            ReceiptCheckpoint.objects.bulk_create([ReceiptCheckpoint(seq=result.checked, hash=last_hash)],
                                                  ignore_conflicts=True)
    return result


def receipt_verify_since_checkpoint() -> Verification:
    """For pages that show the chain's state on every load: the receipts after the newest checkpoint only.

    The receipt at the checkpoint must still carry the hash that was verified; what comes before it
    is not looked at again here (receipt_verify_chain, which never reads checkpoints, does that).
    With no checkpoint yet, this is a full verification (which then writes one)."""
    point = ReceiptCheckpoint.objects.order_by("-seq").first()
    if point is None:
        return receipt_verify_chain()
    current = Receipt.objects.filter(seq=point.seq).values_list("id", "hash").first()
    if current is None or current[1] != point.hash:
        return Verification(False, 0, str(current[0]) if current else None, point.seq,
                            "hash differs from the one verified at the checkpoint: the chain was rewritten",
                            since=point.seq)
    result, _ = _verify(expected_prev=point.hash, expected_seq=point.seq + 1, upto_seq=None, since=point.seq)
    return Verification(result.valid, point.seq + result.checked, result.receipt, result.seq, result.reason,
                        since=point.seq)


def receipt_verify(*, receipt: Receipt) -> Verification:
    """Verify one receipt: its own hash, and the chain up to it."""
    result = receipt_verify_chain(upto_seq=receipt.seq)
    if result.valid:
        return Verification(True, result.checked, str(receipt.id), receipt.seq, "hash chain intact up to this receipt")
    return result
