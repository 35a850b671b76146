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
cannot take back the heads the witness recorded while the chain grew. The checks themselves are
record_chain's, which the trust chain shares; this module says what is the review chain's own.
"""

from . import jcs
from .chain import ChainResult, Failure, label, parse_jsonl
from .messages import GENESIS
from .record_chain import (RecordChain, check_chain_record, verify_chain_checkpoints, verify_chain_file,
                           verify_chain_records)

REVIEW_DOMAIN = b"warrant.review.v1\n"
REVIEW_CHECKPOINT_DOMAIN = b"warrant.review-checkpoint.v1\n"
REVIEW_CHECKPOINT_KIND = "warrant.review-checkpoint"
REVIEW_FILE = "reviews.jsonl"  # the whole review chain, #1 to its head when the bundle was made
FORMAT = 1
KINDS = ("sign_off", "finding", "follow_up")
SEVERITIES = ("low", "medium", "high", "critical")


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


REVIEW = RecordChain(noun="review record", name="review", domain=REVIEW_DOMAIN,
                     checkpoint_domain=REVIEW_CHECKPOINT_DOMAIN, checkpoint_kind=REVIEW_CHECKPOINT_KIND,
                     file=REVIEW_FILE, section="reviews", ids={"record_id": "id", "run_id": "run_id"},
                     body_problems=_body_problems, neighbour_problems=_follow_problems)


def review_message(*, seq: int, prev_hash: str, hash: str, key_id: str, record_id: str, run_id: str) -> bytes:
    """What a review record's signature covers: its place in the review chain and its hash."""
    return REVIEW.message(seq=seq, prev_hash=prev_hash, hash=hash, key_id=key_id, record_id=record_id, run_id=run_id)


review_checkpoint_message = REVIEW.checkpoint_message
is_review_checkpoint = REVIEW.is_checkpoint


def verify_review_checkpoints(checkpoints, *, keys: dict, hash_at: dict, head_seq: int, made_at: str | None,
                              file: str, labels=None) -> list[Failure]:
    """Signed heads of the review chain against its records' hashes (record_chain.verify_chain_checkpoints)."""
    return verify_chain_checkpoints(REVIEW, checkpoints, keys=keys, hash_at=hash_at, head_seq=head_seq,
                                    made_at=made_at, file=file, labels=labels)


def check_review_record(record, keys) -> list[str]:
    """Everything about one review record that needs no neighbour: shape, hash, body, signature."""
    return check_chain_record(REVIEW, record, keys)


def verify_review_records(records, *, keys: dict, start_seq: int = 1, start_prev: str = GENESIS,
                          file: str = REVIEW_FILE, known: dict | None = None) -> ChainResult:
    """Check consecutive review records; every failure is reported, the walk re-syncs after a break.

    `known`: record id -> (run id, kind) of records before `start_seq` (a follow-up may name one);
    kept up to date as the records are walked."""
    return verify_chain_records(REVIEW, records, keys=keys, start_seq=start_seq, start_prev=start_prev, file=file,
                                seen=known)


# --- in an evidence bundle ---------------------------------------------------------------------

def verify_review_file(data: bytes | None, *, keys: dict, section,
                       receipts: bytes | None) -> tuple[list[Failure], str, ChainResult]:
    """reviews.jsonl against the manifest's signed `reviews` section ({count, head_seq, head_hash}),
    and each record's reviewed receipt against the bundle's receipt of that run when it holds one.
    (failures, the summary's note, the chain as walked: its head and hashes, for the review
    checkpoints). A bundle from before review records has neither file nor section."""
    failures, note, result, rows = verify_chain_file(REVIEW, data, keys=keys, section=section)
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
    return failures, note, result
