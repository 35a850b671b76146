"""The review chain: compliance reviewers' records (sign-offs, findings, follow-ups), chained and
signed like receipts, checked here by the server and by an auditor alike.

A record is {id, run_id, seq, prev_hash, hash, body, key_id, signature}: hash = sha256(prev_hash +
body) (the receipts' link, messages.receipt_hash), body RFC 8785 canonical JSON with v = 1, seq
gap-free from 1 in a chain of its own; the signature (Ed25519, by the receipt signing key) covers
seq, prev_hash, hash, key id, record id and run id under a domain prefix of its own, so a review
signature never passes for a receipt's, nor a receipt's for a review's. A retired key signs no
record dated after its retirement. A follow-up names an earlier finding (or follow-up) of the
same run.

The review chain's head is witnessed like the receipts' (the same sinks, a checkpoint kind and
signing domain of its own): whoever holds the signing key can re-sign a rewritten review chain, but
cannot take back the heads the witness recorded while the chain grew.
"""

from . import jcs
from .chain import ChainResult, Failure, is_hex64, is_int, label, parse_time, retired_bound_problem
from .keys import verify_signature
from .messages import GENESIS, receipt_hash

REVIEW_DOMAIN = b"warrant.review.v1\n"
REVIEW_CHECKPOINT_DOMAIN = b"warrant.review-checkpoint.v1\n"
REVIEW_CHECKPOINT_KIND = "warrant.review-checkpoint"
FORMAT = 1
KINDS = ("sign_off", "finding", "follow_up")
SEVERITIES = ("low", "medium", "high", "critical")


def review_message(*, seq: int, prev_hash: str, hash: str, key_id: str, record_id: str, run_id: str) -> bytes:
    """What a review record's signature covers: its place in the review chain and its hash."""
    return REVIEW_DOMAIN + jcs.canonicalize({"seq": seq, "prev_hash": prev_hash, "hash": hash, "key_id": key_id,
                                             "record_id": record_id, "run_id": run_id})


def review_checkpoint_message(checkpoint: dict) -> bytes:
    """What a review checkpoint's signature covers: every field of it but the signature."""
    return REVIEW_CHECKPOINT_DOMAIN + jcs.canonicalize({k: v for k, v in checkpoint.items() if k != "signature"})


def is_review_checkpoint(document) -> bool:
    """A witness line of the review chain (the witness file holds both chains' checkpoints)."""
    return isinstance(document, dict) and document.get("kind") == REVIEW_CHECKPOINT_KIND


def verify_review_checkpoints(checkpoints, *, keys: dict, hash_at: dict, head_seq: int, made_at: str | None,
                              file: str, labels=None) -> list[Failure]:
    """Signed heads of the review chain against its records' hashes (`hash_at`: seq -> stored hash).

    A checkpoint at or before `head_seq` must name that record's hash, or the chain was rewritten
    after it was witnessed. One past the head, signed before `made_at` (when the chain was read),
    proves records were cut off the end; one dated after it may rightly know of newer records. A
    review checkpoint is dated by its signer, and a retired key signs none dated after retirement."""
    failures: list[Failure] = []
    for index, checkpoint in enumerate(checkpoints):
        where = labels[index] if labels else f"line {index + 1}"
        seq = checkpoint.get("seq") if isinstance(checkpoint, dict) else None
        if not is_review_checkpoint(checkpoint) or checkpoint.get("v") != 1 or not is_int(seq) or seq < 1 \
                or not is_hex64(checkpoint.get("head")):
            failures.append(Failure(file, where, f"not a v1 {REVIEW_CHECKPOINT_KIND} with a positive integer seq "
                                                 "and a hex head"))
            continue
        where = f"review checkpoint {seq}"
        try:
            message = review_checkpoint_message(checkpoint)
        except (jcs.CanonicalizationError, UnicodeEncodeError) as exc:
            failures.append(Failure(file, where, f"cannot be canonicalized ({exc})"))
            continue
        kid = checkpoint.get("key_id")
        reason = verify_signature(keys, kid, message, checkpoint.get("signature")) or retired_bound_problem(
            keys, kid, dated=True, at=checkpoint.get("at"))
        if reason:
            failures.append(Failure(file, where, reason))
        if seq <= head_seq:
            stored = hash_at.get(seq)
            if stored is None:
                failures.append(Failure(file, where, f"no review record #{seq} to match this checkpoint"))
            elif stored != checkpoint["head"]:
                failures.append(Failure(file, where, f"signed head for review record #{seq} differs from its hash: "
                                                     "the review chain was rewritten after this checkpoint"))
        elif made_at is not None:
            at, made = parse_time(checkpoint.get("at")), parse_time(made_at)
            if not (at and made and at > made):
                failures.append(Failure(file, where, f"review checkpoint at #{seq}, signed before the review chain "
                                                     f"was read, is past its head (#{head_seq}): review records "
                                                     "were cut off the end"))
    return failures


def _body_problems(body: dict, record: dict) -> list[str]:
    problems = []
    if body.get("v") != FORMAT:
        problems.append(f"body v is {body.get('v')!r}, not {FORMAT}")
    if body.get("record_id") != record["id"]:
        problems.append(f"body names record {body.get('record_id')!r}, the row is {record['id']}")
    if body.get("run_id") != record["run_id"]:
        problems.append(f"body names run {body.get('run_id')!r}, the record run {record['run_id']}")
    kind = body.get("kind")
    if kind not in KINDS:
        problems.append(f"body kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "finding" and body.get("severity") not in SEVERITIES:
        problems.append(f"a finding with severity {body.get('severity')!r}")
    if kind == "follow_up" and not isinstance(body.get("follows"), str):
        problems.append("a follow-up that follows no record")
    return problems


def check_review_record(record, keys) -> list[str]:
    """Everything about one review record that needs no neighbour: shape, hash, body, signature."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    problems = [f"{name} is missing or not a string" for name in ("id", "run_id", "body", "key_id", "signature")
                if not isinstance(record.get(name), str)]
    problems += [f"{name} is not 64 lowercase hex digits" for name in ("prev_hash", "hash")
                 if not is_hex64(record.get(name))]
    if not is_int(record.get("seq")):
        problems.append("seq is missing or not an integer")
    if problems:
        return problems
    text = record["body"]
    try:
        if receipt_hash(record["prev_hash"], text) != record["hash"]:
            problems.append("hash is not sha256(prev_hash + body): the body or a hash was edited")
    except UnicodeEncodeError:
        return ["body is not valid Unicode text"]
    body = None
    try:
        body = jcs.loads(text)
    except (ValueError, RecursionError):
        problems.append("body is not JSON")
    if body is not None and not isinstance(body, dict):
        problems.append("body is not a JSON object")
        body = None
    if body is not None:
        if not jcs.is_canonical(text, body):
            problems.append("body is not RFC 8785 canonical JSON")
        problems += _body_problems(body, record)
    try:
        message = review_message(seq=record["seq"], prev_hash=record["prev_hash"], hash=record["hash"],
                                 key_id=record["key_id"], record_id=record["id"], run_id=record["run_id"])
    except (jcs.CanonicalizationError, UnicodeEncodeError):
        return problems + ["seq, record id or run id cannot be canonicalized, so no signature can cover them"]
    reason = verify_signature(keys, record["key_id"], message, record["signature"]) or retired_bound_problem(
        keys, record["key_id"], dated=True, at=(body or {}).get("at"))
    if reason:
        problems.append(reason)
    return problems


def verify_review_records(records, *, keys: dict, start_seq: int = 1, start_prev: str = GENESIS,
                          file: str = "reviews.jsonl", known: dict | None = None) -> ChainResult:
    """Check consecutive review records; every failure is reported, the walk re-syncs after a break.

    `known`: record id -> (run id, kind) of records before `start_seq` (a follow-up may name one)."""
    seen = dict(known or {})
    failures: list[Failure] = []
    hashes: dict[int, str] = {}
    expected_seq, expected_prev, checked = start_seq, start_prev, 0
    for index, record in enumerate(records):
        where = label(record, index)
        reasons = check_review_record(record, keys)
        record = record if isinstance(record, dict) else {}
        seq, prev, stored = record.get("seq"), record.get("prev_hash"), record.get("hash")
        if is_int(seq) and seq != expected_seq:
            reasons.insert(0, f"seq {seq} where {expected_seq} was expected: a review record is missing, duplicated "
                              "or out of order")
        if prev != expected_prev:
            reasons.insert(0, "prev_hash is not the chain's start" if index == 0
                           else f"prev_hash does not link to the hash of the record before it (seq {expected_seq - 1})")
        reasons += _follow_problems(record, seen)
        failures.extend(Failure(file, where, reason) for reason in reasons)
        if is_int(seq):
            expected_seq = seq
            if is_hex64(stored):
                hashes.setdefault(seq, stored)
        expected_seq += 1
        expected_prev = stored
        checked += 1
    return ChainResult(checked, expected_seq - 1, expected_prev if isinstance(expected_prev, str) else "", failures,
                       hashes)


def _follow_problems(record: dict, seen: dict) -> list[str]:
    """A follow-up names a finding or follow-up of the same run sealed before it."""
    try:
        body = jcs.loads(record.get("body", ""))
    except (ValueError, RecursionError, TypeError):
        return []
    if not isinstance(body, dict):
        return []
    problems = []
    follows = body.get("follows")
    if isinstance(follows, str):
        earlier = seen.get(follows)
        if earlier is None:
            problems.append(f"follows record {follows}, which is not earlier in the review chain")
        elif earlier[0] != body.get("run_id") or earlier[1] not in ("finding", "follow_up"):
            problems.append(f"follows record {follows}, which is not a finding or follow-up of the same run")
    if isinstance(record.get("id"), str):
        seen[record["id"]] = (body.get("run_id"), body.get("kind"))
    return problems


# --- in an evidence bundle ---------------------------------------------------------------------

REVIEW_FILE = "reviews.jsonl"  # the whole review chain, #1 to its head when the bundle was made


def verify_review_file(data: bytes | None, *, keys: dict, section,
                       receipts: bytes | None) -> tuple[list[Failure], str, ChainResult]:
    """reviews.jsonl against the manifest's signed `reviews` section ({count, head_seq, head_hash}),
    and each record's reviewed receipt against the bundle's receipt of that run when it holds one.
    (failures, the summary's note, the chain as walked: its head and hashes, for the review
    checkpoints). A bundle from before review records has neither file nor section."""
    from .chain import parse_jsonl

    if not data and section is None:
        return [], "no review chain in this bundle", ChainResult(0, 0, GENESIS, [], {})
    failures: list[Failure] = []
    rows, bad = parse_jsonl(data or b"", REVIEW_FILE)
    failures += bad
    result = verify_review_records([row for _, row in rows], keys=keys)
    failures += result.failures
    if not isinstance(section, dict):
        failures.append(Failure("manifest.json", "reviews", "no reviews section: nothing signed vouches for "
                                                            f"{REVIEW_FILE}'s extent"))
    elif (section.get("count"), section.get("head_seq"), section.get("head_hash")) != (
            len(rows), result.head_seq, result.head_hash if rows else GENESIS):
        failures.append(Failure(REVIEW_FILE, "file", f"the chain ends at #{result.head_seq} with {len(rows)} "
                                f"records, the manifest says #{section.get('head_seq')!r} with {section.get('count')!r}: "
                                "review records were cut off, added or rewritten"))
    sealed = {}
    for _, receipt in parse_jsonl(receipts or b"", "receipts.jsonl")[0]:
        if isinstance(receipt, dict) and isinstance(receipt.get("run_id"), str):
            sealed.setdefault(receipt["run_id"], (receipt.get("seq"), receipt.get("hash")))
    for index, (_, record) in enumerate(rows):
        try:
            body = jcs.loads(record.get("body", "")) if isinstance(record, dict) else None
        except (ValueError, RecursionError, TypeError):
            continue
        reviewed = (body or {}).get("receipt") if isinstance(body, dict) else None
        if isinstance(reviewed, dict) and record.get("run_id") in sealed and sealed[record["run_id"]] != (
                reviewed.get("seq"), reviewed.get("hash")):
            failures.append(Failure(REVIEW_FILE, label(record, index), f"reviewed receipt #{reviewed.get('seq')} of run "
                                    f"{record['run_id']}, which is not the receipt the bundle holds for it"))
    return failures, f"{len(rows)} review records (#1-#{result.head_seq})", result
