"""Signed record chains beside the receipts: the review chain (review_chain) and the trust chain
(trust_chain) are both checked by this code, each described by a RecordChain.

A record is {seq, prev_hash, hash, body, key_id, signature} and the chain's own string fields
(`ids`): hash = sha256(prev_hash + body) (the receipts' link, messages.receipt_hash), body RFC 8785
canonical JSON, seq gap-free from 1 in a chain of its own; the Ed25519 signature (by the receipt
signing key) covers seq, prev_hash, hash, key id and the ids under the chain's own domain prefix,
so no chain's signature passes for another's or for a receipt's. A retired key signs no record
dated (body "at") after its retirement.

Each chain's head is witnessed like the receipts' (the same sinks, a checkpoint kind and signing
domain of its own): whoever holds the signing key can re-sign a rewritten chain, but cannot take
back the heads the witness recorded while it grew.
"""

from collections.abc import Callable
from dataclasses import dataclass

from . import jcs
from .chain import ChainResult, Failure, is_hex64, is_int, label, parse_jsonl, parse_time, retired_bound_problem
from .keys import verify_signature
from .messages import GENESIS, receipt_hash


def _no_problems(*_args) -> list[str]:
    return []


@dataclass(frozen=True)
class RecordChain:
    noun: str  # one record, in reports: "review record"
    name: str  # "review": "review chain", "review checkpoint"
    domain: bytes  # the records' signing domain
    checkpoint_domain: bytes
    checkpoint_kind: str  # the witness line's kind
    file: str  # its file in an evidence bundle
    section: str  # the manifest's signed account of that file
    ids: dict  # what the signature covers besides the link: message key -> the record's string field
    body_problems: Callable[[dict, dict], list[str]]  # (body, record): what the body says wrong
    # (record, seen): what a record says wrong of those before it; `seen` is the chain's to keep.
    neighbour_problems: Callable[[dict, dict], list[str]] = _no_problems

    def message(self, *, seq: int, prev_hash: str, hash: str, key_id: str, **ids: str) -> bytes:
        """What a record's signature covers: its place in the chain, its hash and its ids."""
        return self.domain + jcs.canonicalize({"seq": seq, "prev_hash": prev_hash, "hash": hash, "key_id": key_id,
                                               **ids})

    def checkpoint_message(self, checkpoint: dict) -> bytes:
        """What a checkpoint's signature covers: every field of it but the signature."""
        return self.checkpoint_domain + jcs.canonicalize({k: v for k, v in checkpoint.items() if k != "signature"})

    def is_checkpoint(self, document) -> bool:
        """A witness line of this chain (the witness file holds every chain's checkpoints)."""
        return isinstance(document, dict) and document.get("kind") == self.checkpoint_kind


def verify_chain_checkpoints(spec: RecordChain, checkpoints, *, keys: dict, hash_at: dict, head_seq: int,
                             made_at: str | None, file: str, labels=None) -> list[Failure]:
    """Signed heads of the chain against its records' hashes (`hash_at`: seq -> stored hash).

    A checkpoint at or before `head_seq` must name that record's hash, or the chain was rewritten
    after it was witnessed. One past the head, signed before `made_at` (when the chain was read),
    proves records were cut off the end; one dated after it may rightly know of newer records. A
    checkpoint is dated by its signer, and a retired key signs none dated after retirement."""
    failures: list[Failure] = []
    point = f"{spec.name} checkpoint"
    for index, checkpoint in enumerate(checkpoints):
        where = labels[index] if labels else f"line {index + 1}"
        seq = checkpoint.get("seq") if isinstance(checkpoint, dict) else None
        if not spec.is_checkpoint(checkpoint) or checkpoint.get("v") != 1 or not is_int(seq) or seq < 1 \
                or not is_hex64(checkpoint.get("head")):
            failures.append(Failure(file, where, f"not a v1 {spec.checkpoint_kind} with a positive integer seq "
                                                 "and a hex head"))
            continue
        where = f"{point} {seq}"
        try:
            message = spec.checkpoint_message(checkpoint)
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
                failures.append(Failure(file, where, f"no {spec.noun} #{seq} to match this checkpoint"))
            elif stored != checkpoint["head"]:
                failures.append(Failure(file, where, f"signed head for {spec.noun} #{seq} differs from its hash: "
                                                     f"the {spec.name} chain was rewritten after this checkpoint"))
        elif made_at is not None:
            at, made = parse_time(checkpoint.get("at")), parse_time(made_at)
            if not (at and made and at > made):
                failures.append(Failure(file, where, f"{point} at #{seq}, signed before the {spec.name} chain "
                                                     f"was read, is past its head (#{head_seq}): {spec.noun}s "
                                                     "were cut off the end"))
    return failures


def check_chain_record(spec: RecordChain, record, keys) -> list[str]:
    """Everything about one record that needs no neighbour: shape, hash, body, signature."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    problems = [f"{name} is missing or not a string" for name in (*spec.ids.values(), "body", "key_id", "signature")
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
        problems += spec.body_problems(body, record)
    try:
        message = spec.message(seq=record["seq"], prev_hash=record["prev_hash"], hash=record["hash"],
                               key_id=record["key_id"], **{key: record[field] for key, field in spec.ids.items()})
    except (jcs.CanonicalizationError, UnicodeEncodeError):
        return problems + ["seq or an id cannot be canonicalized, so no signature can cover them"]
    reason = verify_signature(keys, record["key_id"], message, record["signature"]) or retired_bound_problem(
        keys, record["key_id"], dated=True, at=(body or {}).get("at"))
    if reason:
        problems.append(reason)
    return problems


def verify_chain_records(spec: RecordChain, records, *, keys: dict, start_seq: int = 1, start_prev: str = GENESIS,
                         file: str | None = None, seen: dict | None = None) -> ChainResult:
    """Check consecutive records; every failure is reported, the walk re-syncs after a break.
    `seen`: what neighbour_problems kept of the records before `start_seq`; given, it is kept up to
    date, so a chain walked in chunks passes the same dict to each."""
    seen = {} if seen is None else seen
    file = file or spec.file
    failures: list[Failure] = []
    hashes: dict[int, str] = {}
    expected_seq, expected_prev, checked = start_seq, start_prev, 0
    for index, record in enumerate(records):
        where = label(record, index)
        reasons = check_chain_record(spec, record, keys)
        record = record if isinstance(record, dict) else {}
        seq, prev, stored = record.get("seq"), record.get("prev_hash"), record.get("hash")
        if is_int(seq) and seq != expected_seq:
            reasons.insert(0, f"seq {seq} where {expected_seq} was expected: a {spec.noun} is missing, duplicated "
                              "or out of order")
        if prev != expected_prev:
            reasons.insert(0, "prev_hash is not the chain's start" if index == 0
                           else f"prev_hash does not link to the hash of the record before it (seq {expected_seq - 1})")
        reasons += spec.neighbour_problems(record, seen)
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


def verify_chain_file(spec: RecordChain, data: bytes | None, *, keys: dict,
                      section) -> tuple[list[Failure], str, ChainResult, list]:
    """The chain's file in a bundle against the manifest's signed section ({count, head_seq,
    head_hash}): (failures, the summary's note, the chain as walked, the parsed (line, record)
    rows). A bundle from before the chain has neither file nor section."""
    if not data and section is None:
        return [], f"no {spec.name} chain in this bundle", ChainResult(0, 0, GENESIS, [], {}), []
    failures: list[Failure] = []
    rows, bad = parse_jsonl(data or b"", spec.file)
    failures += bad
    result = verify_chain_records(spec, [row for _, row in rows], keys=keys)
    failures += result.failures
    if not isinstance(section, dict):
        failures.append(Failure("manifest.json", spec.section, f"no {spec.section} section: nothing signed vouches "
                                                               f"for {spec.file}'s extent"))
    elif (section.get("count"), section.get("head_seq"), section.get("head_hash")) != (
            len(rows), result.head_seq, result.head_hash if rows else GENESIS):
        failures.append(Failure(spec.file, "file", f"the chain ends at #{result.head_seq} with {len(rows)} "
                                f"records, the manifest says #{section.get('head_seq')!r} with {section.get('count')!r}: "
                                f"{spec.noun}s were cut off, added or rewritten"))
    return failures, f"{len(rows)} {spec.noun}s (#1-#{result.head_seq})", result, rows
