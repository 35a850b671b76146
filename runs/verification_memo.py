"""What verification remembers, in this process, of the receipts it found whole: verifying the
chain again (the workbench's button, the API, the admin, any later verify in a long-lived process)
then holds each such receipt to its run without parsing its body or checking its signature again.

An entry is made only for a receipt that passed every check by itself (shape, hash, canonical v2
body naming its run, a good signature by its key) and whose body matched its run's row, trace and
approvals in the same verification. It is keyed by a digest of the public key that signed it and
of every column its hash and signature cover (seq, prev_hash, hash, key id, run id, signature),
and holds a digest of what the body sealed of its run. A later verification uses the entry only
after recomputing the receipt's hash from its body (the hash pins the bytes the entry was made
of), so a changed body, hash, seq, link, signature or key misses it and is checked in full; the
run's row, events and approvals are read every time and held to the remembered digest, and any
difference is checked in full, which names it. The key's retirement bound and the links are
checked every time by warrant_verify. Memory only, like runs.signing's remembered signatures:
nothing written to the database can make an entry.
"""

import hashlib
import json

from warrant_verify.keys import raw_public_bytes
from warrant_verify.messages import receipt_hash
from warrant_verify.trace import trace_summary

LIMIT = 500_000  # about 90 MB (182 bytes an entry, measured with tracemalloc); past it the memory starts over
_sealed: dict[bytes, bytes] = {}


def raw_keys(keys: dict) -> dict[str, bytes]:
    """Key id -> raw public key, once per verification (entries are of the key, not only its id)."""
    return {kid: raw_public_bytes(key) for kid, key in keys.items()}


def _entry_key(record: dict, raw: dict) -> bytes | None:
    public = raw.get(record["key_id"])
    if public is None:
        return None
    columns = (public, record["seq"], record["prev_hash"], record["hash"], record["key_id"], record["run_id"],
               record["signature"])
    return hashlib.sha256(repr(columns).encode("utf-8", "surrogatepass")).digest()


def vouched(records: list[dict], raw: dict) -> dict[int, bytes]:
    """Index -> the remembered digest of what the body sealed, for the records found whole before
    whose body still hashes to their stored hash."""
    found = {}
    for index, record in enumerate(records):
        key = _entry_key(record, raw)
        sealed = _sealed.get(key) if key is not None else None
        if sealed is None:
            continue
        try:
            if receipt_hash(record["prev_hash"], record["body"]) == record["hash"]:
                found[index] = sealed
        except UnicodeEncodeError:
            continue
    return found


def remember(record: dict, raw: dict, body: dict) -> None:
    """Called for a receipt that passed every check, with its body as parsed by them."""
    sealed, key = sealed_digest(body), _entry_key(record, raw)
    if sealed is None or key is None:
        return
    if len(_sealed) >= LIMIT:
        _sealed.clear()
    _sealed[key] = sealed


def _digest(fields: tuple) -> bytes:
    # repr of str, int, bool, None, float, list and dict values: equal text only for equal values.
    return hashlib.sha256(repr(fields).encode("utf-8", "surrogatepass")).digest()


def _approvals_text(approvals) -> str | None:
    if approvals == []:
        return "[]"
    try:  # sorted keys: the body's objects come canonical, the rows' in the order they were built
        return json.dumps(approvals, sort_keys=True)
    except (TypeError, ValueError):
        return None


def sealed_digest(body: dict) -> bytes | None:
    """What a v2 body sealed of its run, as held_digest states the run; None for a body without an
    outcome or trace object (those are always compared in full)."""
    outcome, trace = body.get("outcome"), body.get("trace")
    if body.get("v") != 2 or not isinstance(outcome, dict) or not isinstance(trace, dict):
        return None
    approvals = _approvals_text(body.get("approvals"))
    if approvals is None:
        return None
    return _digest((body.get("status"), body.get("tainted"), body.get("stop_reason"), body.get("error"),
                    body.get("policy_snapshot_sha256"), outcome.get("refused"), outcome.get("refused_kinds"),
                    body.get("input_sha256"), body.get("output_sha256"), trace.get("events"), trace.get("head"),
                    approvals))


def held_digest(run_id: str, row, events: list[dict], approvals: list) -> bytes | None:
    """sealed_digest's fields as the database holds them now (row: cross_check's run columns);
    None when the run is missing or its events do not hold together by themselves."""
    if row is None:
        return None
    status, input_text, output_text, tainted, stop_reason, error, policy_digest, refused, kinds = row
    failures, count, head = trace_summary(events, where=f"run {run_id}")
    text = _approvals_text(approvals)
    if failures or head is None or text is None:
        return None
    return _digest((status, tainted, stop_reason or None, error or None, policy_digest, refused, kinds,
                    hashlib.sha256(input_text.encode("utf-8")).hexdigest(),
                    hashlib.sha256(output_text.encode("utf-8")).hexdigest(), count, head, text))
