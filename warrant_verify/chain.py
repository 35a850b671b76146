"""Receipt chain, run trace and checkpoint verification, reporting every failure found.

After a broken link the walk re-syncs on the stored hashes, so one deleted receipt is reported
once, where it is, instead of marking everything after it as broken.
"""

import json
import os
from dataclasses import dataclass, field
from datetime import datetime

from . import jcs
from .keys import from_portable, portable, retirement_of, verify_signature
from .legacy import AFTER_SIGNING, is_legacy, legacy_problems
from .messages import GENESIS, checkpoint_message, receipt_hash, receipt_message
from .shapes import HEX64, Failure, is_hex64, is_int  # noqa: F401 (re-exported)
from .spread import spread
from .trace import verify_trace  # noqa: F401 (re-exported)

# Below this, starting processes costs more than the signatures they would share out.
PARALLEL_THRESHOLD = 4000
TRACE_PARALLEL_THRESHOLD = 20000
_CHUNK = 2500


@dataclass
class ChainResult:
    checked: int
    head_seq: int
    head_hash: str
    failures: list[Failure]
    hashes: dict[int, str] = field(default_factory=dict)  # seq -> stored hash, for checkpoints
    legacy: list = field(default_factory=list)  # seqs of the receipts from before signing (legacy.py)
    signed: bool = False  # a signed receipt was seen (or was before these): none after it is legacy


def label(record: dict, index: int) -> str:
    seq = record.get("seq") if isinstance(record, dict) else None
    return f"seq {seq}" if is_int(seq) else f"record {index + 1}"


def check_receipt(record, keys, *, legacy_ok: bool = False) -> list[str]:
    """Everything about one receipt that needs no neighbour: shape, hash, body, signature.
    `legacy_ok`: a receipt from before signing (legacy.py) may stand here; its neighbours decide."""
    return receipt_problems(record, keys, legacy_ok=legacy_ok)[0]


def receipt_problems(record, keys, *, legacy_ok: bool = False) -> tuple[list[str], dict | None]:
    """check_receipt's problems, and the body as parsed for them (None when it is not a JSON
    object, or the receipt is legacy): callers that read the body's fields need not parse it again."""
    if not isinstance(record, dict):
        return ["not a JSON object"], None
    problems = []
    for name in ("id", "run_id", "body", "key_id", "signature"):
        if not isinstance(record.get(name), str):
            problems.append(f"{name} is missing or not a string")
    for name in ("prev_hash", "hash"):
        if not is_hex64(record.get(name)):
            problems.append(f"{name} is not 64 lowercase hex digits")
    if not is_int(record.get("seq")):
        problems.append("seq is missing or not an integer")
    if problems:
        return problems, None
    if legacy_ok and is_legacy(record):
        return legacy_problems(record), None
    body = record["body"]
    try:
        if receipt_hash(record["prev_hash"], body) != record["hash"]:
            problems.append("hash is not sha256(prev_hash + body): the body or a hash was edited")
    except UnicodeEncodeError:
        return ["body is not valid Unicode text"], None
    try:
        parsed = jcs.loads(body)
    except (ValueError, RecursionError):
        parsed = None
        problems.append("body is not JSON")
    if parsed is not None:
        if not isinstance(parsed, dict):
            problems.append("body is not a JSON object")
            parsed = None
        else:
            if not jcs.is_canonical(body, parsed):
                problems.append("body is not RFC 8785 canonical JSON")
            if parsed.get("v") != 2:
                problems.append(f"body v is {parsed.get('v')!r}, not 2")
            if parsed.get("run_id") != record["run_id"]:
                problems.append(f"body names run {parsed.get('run_id')!r}, the receipt run {record['run_id']}")
    try:
        message = receipt_message(seq=record["seq"], prev_hash=record["prev_hash"], hash=record["hash"],
                                  key_id=record["key_id"], run_id=record["run_id"])
    except (jcs.CanonicalizationError, UnicodeEncodeError):
        problems.append("seq or run_id cannot be canonicalized, so no signature can cover them")
        return problems, parsed
    reason = verify_signature(keys, record["key_id"], message, record["signature"]) \
        or retired_bound_problem(keys, record["key_id"], seq=record["seq"])
    if reason:
        problems.append(reason)
    return problems, parsed


def retired_bound_problem(keys: dict, kid, *, seq=None, dated: bool = False, at=None) -> str:
    """Why a good signature by `kid` lies past its key's retirement ("" when it does not).

    A receipt (or a checkpoint's or manifest's head) after retired_after_seq, or a checkpoint or
    manifest dated after retired_at, was signed by whoever kept the retired private key, not by
    Warrant: Warrant stops signing with a key once it is retired.
    """
    retirement = retirement_of(keys.get(kid)) if isinstance(kid, str) else None
    if retirement is None:
        return ""
    if retirement.after_seq is not None and is_int(seq) and seq > retirement.after_seq:
        return f"signed by key {kid} retired after #{retirement.after_seq}"
    if dated and retirement.at is not None:
        moment = parse_time(at)
        if moment is None:  # an unreadable time is never taken as before the retirement
            return f"signed by key {kid} retired at {retirement.at}, and its time {at!r} cannot be read"
        if moment > parse_time(retirement.at):
            return f"signed by key {kid} retired at {retirement.at}, dated after it ({at})"
    return ""


def _check_chunk(start: int, records: list, raw_keys: dict) -> list[tuple[int, str]]:
    keys = from_portable(raw_keys)
    return [(start + offset, reason) for offset, record in enumerate(records)
            for reason in check_receipt(record, keys, legacy_ok=True)]


def _per_record(records: list, keys: dict, workers: int, bodies: dict | None, vouched) -> list[tuple[int, str]]:
    if workers <= 1 or len(records) < PARALLEL_THRESHOLD:
        found = []
        bounded = {kid for kid, key in keys.items() if retirement_of(key) is not None} if vouched else set()
        for index, record in enumerate(records):
            if index in vouched:  # the key set may have changed since: a retired key's bound is read again
                reason = retired_bound_problem(keys, record["key_id"], seq=record["seq"]) \
                    if record["key_id"] in bounded else ""
                found += [(index, reason)] if reason else []
                continue
            reasons, body = receipt_problems(record, keys, legacy_ok=True)
            found += [(index, reason) for reason in reasons]
            if bodies is not None and body is not None:
                bodies[index] = body
        return found
    # Helpers' bodies would come back pickled, which costs about what parsing them again does.
    return spread(_check_chunk, records, portable(keys), workers=workers, chunk=_CHUNK)


def verify_receipts(records, *, keys: dict, start_seq: int = 1, start_prev: str = GENESIS, workers: int = 1,
                    file: str = "receipts.jsonl", signed_before: bool = False, bodies: dict | None = None,
                    vouched=frozenset()) -> ChainResult:
    """Check a run of consecutive receipt records (dicts shaped as receipts.jsonl lines).
    `signed_before`: a receipt before these is signed, so none of these is from before signing.
    `bodies`, a dict, is given index -> parsed body of the records whose body was parsed here
    (those checked in this process, not legacy ones): a caller holding them to other data need
    not parse them again. `vouched`: indexes of records whose checks by themselves the caller
    has made already (their hash recomputed from their body, which it has seen pass the rest
    with this key): only the links and the key's retirement bound are checked for those here.

    workers > 1 spawns processes for large inputs: a script calling this needs the usual
    `if __name__ == "__main__":` guard.
    """
    records = list(records)
    found: dict[int, list[str]] = {}
    for index, reason in _per_record(records, keys, workers, bodies, vouched):
        found.setdefault(index, []).append(reason)
    failures: list[Failure] = []
    hashes: dict[int, str] = {}
    expected_seq, expected_prev, signed, legacy = start_seq, start_prev, signed_before, []
    for index, record in enumerate(records):
        record = record if isinstance(record, dict) else {}
        seq, prev, stored = record.get("seq"), record.get("prev_hash"), record.get("hash")
        links = [AFTER_SIGNING] if signed and is_legacy(record) else []
        if not signed and is_legacy(record):
            legacy.append(seq)
        signed = signed or bool(record.get("signature"))
        if is_int(seq) and seq != expected_seq:
            links.append(f"seq {seq} where {expected_seq} was expected: a receipt is missing, duplicated or out of order")
        if prev != expected_prev:
            links.append("prev_hash is not the bundle's start_prev_hash" if index == 0
                         else f"prev_hash does not link to the hash of the receipt before it (seq {expected_seq - 1})")
        failures.extend(Failure(file, label(record, index), reason) for reason in links + found.get(index, []))
        if is_int(seq):
            expected_seq = seq
            if is_hex64(stored):
                hashes.setdefault(seq, stored)
        expected_seq += 1
        expected_prev = stored
    if records:
        last = records[-1] if isinstance(records[-1], dict) else {}
        head_seq, head_hash = expected_seq - 1, last.get("hash") if is_hex64(last.get("hash")) else ""
    else:
        head_seq, head_hash = start_seq - 1, start_prev
    return ChainResult(checked=len(records), head_seq=head_seq, head_hash=head_hash, failures=failures, hashes=hashes,
                       legacy=legacy, signed=signed)


def _trace_chunk(start: int, runs: list, file: str) -> list[Failure]:
    return [failure for events, body in runs for failure in verify_trace(events, body=body, file=file)]


def verify_traces(runs: list, *, workers: int = 1, file: str = "events.jsonl") -> list[Failure]:
    """verify_trace over (events, body) pairs; with workers > 1 and many events, in processes.

    Only body["run_id"] and body["trace"] are read, so callers may pass just those.
    """
    if workers > 1 and sum(len(events) for events, _ in runs) >= TRACE_PARALLEL_THRESHOLD:
        return spread(_trace_chunk, runs, file, workers=workers, chunk=max(1, len(runs) // (4 * workers)))
    return _trace_chunk(0, runs, file)


def _signature_chunk(start: int, items: list, raw_keys: dict) -> list[str]:
    keys = from_portable(raw_keys)
    return [verify_signature(keys, kid, message, signature) for kid, message, signature in items]


def _signature_reasons(items: list, keys: dict, *, workers: int, memo: dict) -> list[str]:
    """verify_signature for (key_id, message, signature) items, each distinct one checked once."""
    todo = list(dict.fromkeys(item for item in items if item not in memo))
    if workers > 1 and len(todo) >= PARALLEL_THRESHOLD:
        reasons = spread(_signature_chunk, todo, portable(keys), workers=workers, chunk=_CHUNK)
    else:
        reasons = [verify_signature(keys, kid, message, signature) for kid, message, signature in todo]
    memo.update(zip(todo, reasons))
    return [memo[item] for item in items]


def verify_checkpoints(checkpoints, *, keys: dict, hash_at, first_seq: int, last_seq: int, head_seq: int,
                       complete: bool, file: str = "checkpoints.jsonl", made_at: str | None = None,
                       labels=None, workers: int = 1, memo: dict | None = None) -> list[Failure]:
    """Signed chain heads against the receipts' stored hashes.

    hash_at maps seq -> stored receipt hash. With `complete` (the bundle claims to reach the chain's
    head) a checkpoint past last_seq proves receipts were cut off, unless it is dated after the
    bundle was made (`made_at`): a witness read later may rightly know of newer receipts. Given
    `made_at`, a checkpoint past head_seq dated before it proves the same for a bounded bundle.
    Neither given: signatures and hashes only. `memo`, shared between calls, checks a checkpoint
    found in two places (the database's copy and the witness) once.
    """
    failures: list[Failure] = []
    readable = []
    for index, checkpoint in enumerate(checkpoints):
        where = labels[index] if labels else f"line {index + 1}"
        if not isinstance(checkpoint, dict):
            readable.append((index, where, None, "not a JSON object"))
            continue
        seq, head = checkpoint.get("seq"), checkpoint.get("head")
        if is_int(seq):
            where = f"checkpoint {seq}"
        if checkpoint.get("v") != 1 or checkpoint.get("kind") != "warrant.checkpoint" or not is_int(seq) \
                or not is_hex64(head):
            readable.append((index, where, None, "not a v1 warrant.checkpoint with an integer seq and a hex head"))
            continue
        try:
            message = checkpoint_message(checkpoint)
        except (jcs.CanonicalizationError, UnicodeEncodeError) as exc:
            readable.append((index, where, None, f"cannot be canonicalized ({exc})"))
            continue
        key, signature = checkpoint.get("key_id"), checkpoint.get("signature")
        readable.append((index, where, checkpoint, (key if isinstance(key, str) else repr(key), message,
                                                    signature if isinstance(signature, str) else repr(signature))))
    signed = [item for _, _, checkpoint, item in readable if checkpoint is not None]
    reasons = iter(_signature_reasons(signed, keys, workers=workers, memo={} if memo is None else memo))
    for _, where, checkpoint, item in readable:
        if checkpoint is None:
            failures.append(Failure(file, where, item))
            continue
        reason = next(reasons) or retired_bound_problem(keys, checkpoint.get("key_id"), seq=checkpoint["seq"],
                                                        dated=True, at=checkpoint.get("at"))
        if reason:
            failures.append(Failure(file, where, reason))
        failures.extend(_against_chain(checkpoint, where, hash_at=hash_at, first_seq=first_seq, last_seq=last_seq,
                                       head_seq=head_seq, complete=complete, file=file, made_at=made_at))
    return failures


def _against_chain(checkpoint: dict, where: str, *, hash_at, first_seq, last_seq, head_seq, complete, file,
                   made_at) -> list[Failure]:
    seq, head = checkpoint["seq"], checkpoint["head"]
    stored = hash_at.get(seq)
    if first_seq <= seq <= last_seq or stored is not None:
        if stored is None:
            return [Failure(file, where, f"no receipt seq {seq} in the bundle to match this checkpoint")]
        if stored != head:
            return [Failure(file, where, f"signed head for seq {seq} differs from receipt {seq}'s hash: "
                            "the chain was rewritten after this checkpoint")]
    elif seq > (last_seq if complete else head_seq) and (complete or made_at is not None):
        # Signed before the bundle was made yet past the head the bundle saw: receipts were cut
        # off (a bounded period does not excuse it: head_seq is the chain's head at made_at).
        at, made = parse_time(checkpoint.get("at")), parse_time(made_at)
        if not (at and made and at > made):
            return [Failure(file, where, f"checkpoint at seq {seq} is past the bundle's last receipt "
                            f"(seq {last_seq}, head {head_seq}): the chain's tail was cut off" if complete else
                            f"checkpoint at seq {seq}, signed before the bundle was made, is past the "
                            f"chain's head the bundle recorded (seq {head_seq}): the tail was cut off")]
    return []


def parse_time(text) -> datetime | None:
    """An ISO 8601 time with an offset or "Z"; None for anything else (never trusted as "later")."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else None


def parse_jsonl(data: bytes, file: str) -> tuple[list[tuple[int, dict]], list[Failure]]:
    """(line number, object) pairs and a failure per line that is not a JSON object."""
    rows, failures = [], []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        try:
            value = json.loads(line)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            failures.append(Failure(file, f"line {number}", f"not JSON ({str(exc)[:80]})"))
            continue
        if not isinstance(value, dict):
            failures.append(Failure(file, f"line {number}", "not a JSON object"))
            continue
        rows.append((number, value))
    return rows, failures


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 4))
