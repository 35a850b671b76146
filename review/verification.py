"""Verification of the review chain, with the offline verifier's own code (warrant_verify.review_chain).

What only the database can tell is added here: each record's columns against its sealed body
(reviewer, kind, severity, note, follows, the receipt it reviewed), records of a run with no
review item, and the append-only triggers. The chain is also held against the review checkpoints
in the witness file (review.witness): a chain rewritten by someone holding the signing key, or cut
short, no longer matches a head the witness recorded. The trust chain, signed and witnessed the
same way, is verified with it (review.trust_verification). Every failure is reported, as
runs.verification does.
"""

import json

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from review import append_only
from review.models import ReviewRecord
from review.trust_verification import chunks, trust_verify_problems
from runs import signing, witness
from runs.models import Receipt
from runs.verification import Problem, Verification, _result
from warrant_verify.messages import GENESIS
from warrant_verify.review_chain import REVIEW_CHECKPOINT_KIND, verify_review_checkpoints, verify_review_records

_CHUNK = 2000
COLUMNS = ("id", "run_id", "seq", "prev_hash", "hash", "body", "key_id", "signature")
_SEALED = ("kind", "severity", "note", "follows", "resolves", "item_id", "reviewer__" + get_user_model().USERNAME_FIELD)


def record_of(row: dict) -> dict:
    """A review record as reviews.jsonl holds it (and the verifier reads it)."""
    return {c: (str(row[c]) if c in ("id", "run_id") else row[c]) for c in COLUMNS}


def _cross_check(rows: list[dict], receipts: dict) -> list[Problem]:
    problems = []
    for row in rows:
        try:
            body = json.loads(row["body"])
        except ValueError:
            continue
        if not isinstance(body, dict):
            continue
        name = f"review record #{row['seq']} ({row['id']})"
        sealed = (body.get("kind"), body.get("severity") or "", body.get("note"), body.get("follows"),
                  body.get("resolves"), body.get("item_id"), (body.get("reviewer") or {}).get("username"))
        stored = (row["kind"], row["severity"], row["note"], str(row["follows"]) if row["follows"] else None,
                  row["resolves"], str(row["item_id"]), row[_SEALED[-1]])
        if sealed != stored:
            fields = [f for f, a, b in zip(("kind", "severity", "note", "follows", "resolves", "item", "reviewer"),
                                           sealed, stored) if a != b]
            verb = "differs" if len(fields) == 1 else "differ"
            problems.append(Problem("review", name, f"the row's {', '.join(fields)} {verb} from what the record sealed",
                                    run=str(row["run_id"])))
        receipt = receipts.get(str(row["run_id"]))
        if receipt != ((body.get("receipt") or {}).get("seq"), (body.get("receipt") or {}).get("hash")):
            problems.append(Problem("review", name, "the receipt the record reviewed is gone or differs from the one "
                                    "sealed in it", run=str(row["run_id"])))
    return problems


def _witnessed() -> tuple[list[dict], list[Problem]]:
    """The review checkpoints in the witness file, and a problem for each line that is no checkpoint."""
    lines, bad = witness.witness_file_checkpoints(REVIEW_CHECKPOINT_KIND)
    return lines, [Problem("witness", "witness file", reason) for reason in bad]


def _witness_problems(lines: list[dict], *, keys, hash_at: dict, head_seq: int, made_at: str) -> list[Problem]:
    found = [{k: v for k, v in line.items() if k != "_line"} for line in lines]
    failures = verify_review_checkpoints(found, keys=keys, hash_at=hash_at, head_seq=head_seq, made_at=made_at,
                                         file="witness", labels=[f"line {line['_line']}" for line in lines])
    return [Problem("witness", f"witness file: {failure.record}", failure.reason) for failure in failures]


def review_verify_chain() -> Verification:
    """The whole review chain from #1: links, hashes, bodies, signatures, rows against bodies, the
    witness's review checkpoints, triggers; and the trust chain the same way (review.trust_verification)."""
    made_at = witness._iso(timezone.now())  # before the chain is read: a head signed later may be newer
    keys = signing.verifying_keys()
    witnessed, witness_problems = _witnessed()
    wanted = {line.get("seq") for line in witnessed}
    hash_at: dict[int, str] = {}
    problems, checked, known = [], 0, {}
    start_seq, start_prev = 1, GENESIS
    rows_all = ReviewRecord.objects.order_by("seq").values(*COLUMNS, *_SEALED)

    def walk(rows):
        nonlocal start_seq, start_prev, checked
        records = [record_of(r) for r in rows]
        result = verify_review_records(records, keys=keys, start_seq=start_seq, start_prev=start_prev,
                                       file="review_reviewrecord", known=known)
        for failure in result.failures:
            check = "signature" if ("signature" in failure.reason or "signed by" in failure.reason) else "review_chain"
            problems.append(Problem(check, f"review record {failure.record}", failure.reason))
        receipts = {str(run_id): (seq, hash_) for run_id, seq, hash_ in Receipt.objects.filter(
            run_id__in={r["run_id"] for r in rows}).values_list("run_id", "seq", "hash")}
        problems.extend(_cross_check(rows, receipts))
        checked += result.checked
        hash_at.update({seq: hash_ for seq, hash_ in result.hashes.items() if seq in wanted})
        start_seq, start_prev = result.head_seq + 1, result.head_hash

    for rows in chunks(rows_all, _CHUNK):
        walk(rows)
    problems += witness_problems + _witness_problems(witnessed, keys=keys, hash_at=hash_at, head_seq=start_seq - 1,
                                                     made_at=made_at)
    problems += [Problem("append_only", name, "the append-only trigger is missing or disabled")
                 for name in append_only.missing(connection)]
    trust_checked, trust_witnessed, trust_problems = trust_verify_problems(keys=keys, made_at=made_at)
    against = f", and match the witness's {len(witnessed)} review checkpoints" if witnessed else ""
    trust_against = f", and match the witness's {trust_witnessed} trust checkpoints" if trust_witnessed else ""
    return _result(checked, problems + trust_problems, ok_reason=(  # checked: review records; the reason counts both
        f"all {checked} review records signed and chained, rows match{against}; all {trust_checked} trust changes "
        f"signed and chained, rows and marks match{trust_against}"))
