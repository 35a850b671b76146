"""One verification of the evidence, for the command, the API and the workbench.

The chain, the signatures, the traces and the checkpoints are checked by warrant_verify (the
offline verifier's own code), on the rows as the database holds them. What only the database can
tell is added here: each receipt's body against its run's row (status, input and output digests),
its events and its approval rows; terminal runs that have no receipt; the witness's checkpoints
(the file sink and the database's copies) against the chain; the append-only triggers.
Every failure is reported, each naming its check and record.
"""

import hashlib
import json
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import CharField, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from runs import append_only, signing, witness
from runs import verification_memo as memo
from runs.models import Receipt, ReceiptCheckpoint, Run, RunEvent
from runs.states import TERMINAL
from warrant_verify import chain
from warrant_verify.legacy import AFTER_SIGNING, after_signing, is_legacy_body, legacy_note, v1_approvals
from warrant_verify.messages import GENESIS

_CHUNK = 2000
_RECEIPT_COLUMNS = ("id", "run_id", "seq", "prev_hash", "hash", "body", "key_id", "signature")


@dataclass(frozen=True)
class Problem:
    check: str  # chain, signature, run, trace, approvals, completeness, checkpoints, witness, append_only
    record: str
    reason: str
    seq: int | None = None
    receipt: str | None = None
    run: str | None = None

    def __str__(self) -> str:
        return f"{self.check}: {self.record}: {self.reason}"


@dataclass(frozen=True)
class Verification:
    valid: bool
    checked: int
    receipt: str | None = None  # the first failure's receipt, when it has one
    seq: int | None = None
    reason: str = ""
    since: int | None = None  # the fast path: receipts up to this seq vouched for by a signed checkpoint
    failures: tuple[Problem, ...] = field(default_factory=tuple)
    anchor: tuple[int, str] | None = None  # one receipt: (seq, "witness" or "database") of the checkpoint it chains to

    @property
    def check(self) -> str:
        return self.failures[0].check if self.failures else ""


def _result(checked: int, failures: list[Problem], *, since=None, ok_reason="") -> Verification:
    if not failures:
        return Verification(True, checked, reason=ok_reason, since=since)
    first = failures[0]
    return Verification(False, checked, first.receipt, first.seq, f"{first.check}: {first.reason}", since,
                        tuple(failures))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _json_list(text):
    return [] if text == "[]" else (None if text is None else json.loads(text))


def _uuid_text(value: str) -> str:
    if len(value) != 32:
        return value
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def _receipt_rows(*, from_seq: int, upto_seq: int | None, chunk_size: int = _CHUNK):
    rows = Receipt.objects.filter(seq__gte=from_seq).order_by("seq")
    if upto_seq is not None:
        rows = rows.filter(seq__lte=upto_seq)
    chunk = []
    # The two ids as text, not uuid.UUID objects: building and printing two of them per receipt cost
    # more than hashing its body. UUIDField is 32 hex digits where the database has no uuid type
    # (SQLite), so those get their dashes here.
    texts = {"id": Cast("id", CharField()), "run_id": Cast("run_id", CharField())}
    for values in rows.values_list(*(texts.get(c, c) for c in _RECEIPT_COLUMNS)).iterator(chunk_size=_CHUNK):
        record = dict(zip(_RECEIPT_COLUMNS, values))
        record["id"], record["run_id"] = _uuid_text(record["id"]), _uuid_text(record["run_id"])
        chunk.append(record)
        if len(chunk) == chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _chain_problems(failures, by_seq: dict) -> list[Problem]:
    problems = []
    for failure in failures:
        seq = int(failure.record[4:]) if failure.record.startswith("seq ") else None
        record = by_seq.get(seq, {})
        check = "signature" if ("signature" in failure.reason or "signed by" in failure.reason) else "chain"
        problems.append(Problem(check, f"receipt #{seq} ({record.get('id')})" if record else failure.record,
                                failure.reason, seq, record.get("id"), record.get("run_id")))
    return problems


def first_signed_seq() -> int | None:
    """The first signed receipt's seq: only receipts before it may be from before signing (legacy)."""
    return Receipt.objects.exclude(signature="").order_by("seq").values_list("seq", flat=True).first()


def legacy_late(legacy: list, checkpoint_seqs) -> list[Problem]:
    """Legacy-shaped receipts past a checkpoint (the database's or the witness's): sealed after signing began."""
    return [Problem("signature", f"receipt #{seq}", AFTER_SIGNING, seq) for seq in after_signing(legacy, checkpoint_seqs)]


def _walk(*, keys, from_seq=1, start_prev=GENESIS, upto_seq=None, cross_check=None, want_hashes=(), workers=1,
          legacy=None):
    """The chain from `from_seq`, a chunk at a time: (checked, head seq, head hash, problems, hashes at want_hashes).
    `legacy`, a list, is given the seqs of the receipts from before signing that were walked.

    `workers` > 1 shares the signatures of large chunks out to processes (the command; never a web request)."""
    problems, hashes, checked = [], {}, 0
    expected_seq, expected_prev = from_seq, start_prev
    first_signed = first_signed_seq() if from_seq > 1 else None
    signed = first_signed is not None and first_signed < from_seq
    size = _CHUNK if workers <= 1 else 10 * _CHUNK
    raw = memo.raw_keys(keys)
    for records in _receipt_rows(from_seq=from_seq, upto_seq=upto_seq, chunk_size=size):
        bodies: dict = {}
        vouched = memo.vouched(records, raw)
        result = chain.verify_receipts(records, keys=keys, start_seq=expected_seq, start_prev=expected_prev,
                                       file="runs_receipt", workers=workers, signed_before=signed, bodies=bodies,
                                       vouched=vouched)
        signed = result.signed
        if legacy is not None:
            legacy += result.legacy
        by_seq = {r["seq"]: r for r in records}
        found = _chain_problems(result.failures, by_seq)
        hashes.update({seq: h for seq, h in result.hashes.items() if seq in want_hashes})
        if cross_check is not None:
            found += cross_check(records, bodies, vouched)
            # Only a walk that held the bodies to their runs remembers them (runs.verification_memo).
            failed = {problem.seq for problem in found}
            for index, body in bodies.items():
                if records[index]["seq"] not in failed:
                    memo.remember(records[index], raw, body)
        problems += found
        checked += result.checked
        expected_seq, expected_prev = result.head_seq + 1, result.head_hash
    return checked, expected_seq - 1, expected_prev, problems, hashes


def cross_check(records: list[dict], bodies: dict | None = None, vouched: dict | None = None) -> list[Problem]:
    """Each receipt's body against what the database holds of its run, events and approvals.
    `bodies`: index in `records` -> the body already parsed (chain.verify_receipts's); the others
    are parsed here. `vouched`: index -> runs.verification_memo's digest of what the body sealed,
    held to the run as it is now; only a receipt whose run differs from it has its body read."""
    from runs.receipts import approvals_where

    bodies, vouched = bodies or {}, vouched or {}
    found = {}
    for index, record in enumerate(records):
        body = bodies.get(index)
        if index in vouched:
            found[record["run_id"]] = (record, vouched[index])
            continue
        if body is None:
            try:
                body = json.loads(record["body"])
            except ValueError:
                continue  # the chain check reports it
        if isinstance(body, dict):
            found[record["run_id"]] = (record, body)
    if not found:
        return []
    # The chunk's rows by its receipts' seq range, a join (records are consecutive in seq), each
    # keyed by the seq of the receipt that names its run: no run id to build or convert per row.
    seqs = (min(r["seq"] for r in records), max(r["seq"] for r in records))
    # refused_kinds comes as its JSON text: nearly every run's is [], which needs no json.loads.
    runs = {row[0]: (*row[1:-1], _json_list(row[-1])) for row in Run.objects.filter(
        receipt__seq__range=seqs).values_list("receipt__seq", "status", "input", "output", "tainted", "stop_reason",
                                              "error", "policy_snapshot_sha256", "refused_count",
                                              Cast("refused_kinds", TextField()))}
    events: dict[int, list[dict]] = {}
    for receipt_seq, seq, step, kind, data, hash_ in RunEvent.objects.filter(run__receipt__seq__range=seqs).order_by(
            ).values_list("run__receipt__seq", "seq", "step", "kind", "data", "hash"):
        events.setdefault(receipt_seq, []).append({"seq": seq, "step": step, "kind": kind, "data": data, "hash": hash_})
    approvals = approvals_where(run__receipt__seq__range=seqs)
    problems = []
    for run_id, (record, body) in found.items():
        row, run_events = runs.get(record["seq"]), events.get(record["seq"], [])
        if isinstance(body, bytes):  # vouched: the sealed digest
            if memo.held_digest(run_id, row, run_events, approvals.get(run_id, [])) == body:
                continue
            body = json.loads(record["body"])  # something differs: the comparisons below name what
        where = dict(seq=record["seq"], receipt=record["id"], run=run_id)
        name = f"run {run_id} (receipt #{record['seq']})"
        if row is None:
            problems.append(Problem("run", name, "the receipt's run is not in the database", **where))
        else:
            status, input_text, output_text, tainted, stop_reason, error, policy_digest, refused, kinds = row
            sealed = (body.get("tainted"), body.get("stop_reason"), body.get("error"), body.get("policy_snapshot_sha256"))
            if sealed != (tainted, stop_reason or None, error or None, policy_digest):
                problems.append(Problem("run", name, "the run's taint, stop reason, error or policy snapshot differs "
                                        "from the one sealed", **where))
            if body.get("status") != status:
                problems.append(Problem("run", name, f"the run's status is {status!r}, the receipt sealed "
                                        f"{body.get('status')!r}", **where))
            sealed_outcome = body.get("outcome")  # sealed since refusals were (receipts before have none)
            if isinstance(sealed_outcome, dict) and (sealed_outcome.get("refused"), sealed_outcome.get(
                    "refused_kinds")) != (refused, kinds):
                problems.append(Problem("run", name, "the run's refused count or kinds differ from the ones sealed",
                                        **where))
            if body.get("input_sha256") != _sha256(input_text):
                problems.append(Problem("run", name, "the run's input differs from the one sealed", **where))
            if body.get("output_sha256") != _sha256(output_text):
                problems.append(Problem("run", name, "the run's output differs from the one sealed", **where))
        if is_legacy_body(body):  # sealed before signing: no trace, and approvals on v1's fields (legacy.py)
            if body.get("approvals") != v1_approvals(approvals.get(run_id, [])):
                problems.append(Problem("approvals", name, "the run's approval rows differ from the approvals sealed "
                                        "(decision, decider or time)", **where))
            continue
        for failure in chain.verify_trace(run_events, body=body, file="runs_runevent"):
            problems.append(Problem("trace", failure.record, failure.reason, **where))
        if body.get("approvals") != approvals.get(run_id, []):
            problems.append(Problem("approvals", name, "the run's approval rows differ from the approvals sealed "
                                    "(decision, decider, how they logged in, reason or time)", **where))
    return problems


def _record_of(receipt: Receipt) -> dict:
    record = {c: getattr(receipt, c) for c in _RECEIPT_COLUMNS}
    record["id"], record["run_id"] = str(receipt.id), str(receipt.run_id)
    return record


def _completeness() -> list[Problem]:
    missing = Run.objects.filter(status__in=TERMINAL, receipt__isnull=True).values_list("id", "status")
    return [Problem("completeness", f"run {run_id}", f"the run ended {status} and has no receipt", run=str(run_id))
            for run_id, status in missing.order_by("finished_at", "id")[:1000]]


def _not_sent(stored: list[dict], lines: list[dict]) -> list[dict]:
    """The database's checkpoints the witness file does not hold already (those are checked there)."""
    sent = {json.dumps({k: v for k, v in line.items() if k != "_line"}, sort_keys=True) for line in lines}
    return [d for d in stored if json.dumps(d, sort_keys=True) not in sent]


def _checkpoints() -> tuple[dict[str, list[dict]], list[Problem]]:
    """The checkpoints to hold the chain against, by where they are (the database's copies, the
    witness file), and a problem for each witness line that is not one."""
    lines, bad = witness.witness_file_checkpoints()
    documents = {"checkpoints": _not_sent([p.document() for p in ReceiptCheckpoint.objects.order_by("seq")], lines),
                 "witness": lines}
    return documents, [Problem("witness", "witness file", reason) for reason in bad]


_WHERE = {"checkpoints": "runs_receiptcheckpoint", "witness": "witness file"}


def _checkpoint_problems(documents: dict, *, keys, hash_at, head_seq, made_at, first_seq=1, last_seq=None,
                         complete=True) -> list[Problem]:
    """chain.verify_checkpoints over each place's checkpoints; by default against the whole chain."""
    problems = []
    for check, found in documents.items():
        found = [dict(d) for d in found]
        labels = [f"{_WHERE[check]} line {d.pop('_line')}" if "_line" in d else _WHERE[check] for d in found]
        for failure in chain.verify_checkpoints(found, keys=keys, hash_at=hash_at, first_seq=first_seq,
                                                last_seq=head_seq if last_seq is None else last_seq,
                                                head_seq=head_seq, complete=complete, made_at=made_at, labels=labels,
                                                file=check):
            problems.append(Problem(check, f"{_WHERE[check]}: {failure.record}", failure.reason))
    return problems


def checkpoint_signature_problem(document: dict, *, keys) -> str:
    """Why this checkpoint is not one the signing keys made ("" when it is); its head is not compared."""
    failures = chain.verify_checkpoints([{k: v for k, v in document.items() if k != "_line"}], keys=keys, hash_at={},
                                        first_seq=1, last_seq=0, head_seq=0, complete=False)
    return failures[0].reason if failures else ""


def verify(*, upto_seq: int | None = None, workers: int = 1) -> Verification:
    """Everything: the chain from #1 (up to `upto_seq`), every run against its receipt, every
    checkpoint, and the whole chain's checks. One receipt's answer (the API, the workbench's
    receipt page) is runs.verification_receipt's, bounded by its nearest checkpoint."""
    made_at = witness._iso(timezone.now())
    keys = signing.verifying_keys()
    documents, problems = _checkpoints()
    wanted = {d.get("seq") for found in documents.values() for d in found}
    legacy: list = []
    checked, head_seq, _head, walked, hashes = _walk(keys=keys, upto_seq=upto_seq, want_hashes=wanted, workers=workers,
                                                     cross_check=cross_check, legacy=legacy)
    problems = walked + legacy_late(legacy, wanted) + problems
    # Checkpoints past what was walked still compare with the chain as it is.
    actual = Receipt.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    missing = [seq for seq in wanted if isinstance(seq, int) and seq not in hashes]
    hashes.update(dict(Receipt.objects.filter(seq__in=missing).values_list("seq", "hash")))
    problems += _checkpoint_problems(documents, keys=keys, hash_at=hashes, head_seq=actual, made_at=made_at)
    problems += whole_chain_problems()
    stated = legacy_note(len(legacy), legacy[0], legacy[-1], pinned=first_signed_seq() is not None) if legacy else ""
    return _result(checked, problems, ok_reason=f"all {checked} receipts signed and chained, runs, traces, "
                                                "approvals and checkpoints match" + (f"; {stated}" if stated else ""))


def whole_chain_problems() -> list[Problem]:
    """What no receipt walk shows, each one query: runs ended without a receipt, triggers off."""
    return _completeness() + [Problem("append_only", name, "the append-only trigger is missing or disabled")
                              for name in append_only.missing(connection)]


def receipt_verify_chain(*, upto_seq: int | None = None, workers: int = 1) -> Verification:
    """The whole verification (the command, the workbench's button); `upto_seq` stops the chain walk there."""
    return verify(upto_seq=upto_seq, workers=workers)


def receipt_verify_since_checkpoint() -> Verification:
    """For pages that show the chain's state on every load: signatures and links of the receipts
    after the newest signed checkpoint that matches the chain (it vouches for those before it:
    its head is receipt #seq's hash, which chains to all of them). No checkpoint: from #1."""
    keys = signing.verifying_keys()
    since, prev, problems = 0, GENESIS, []
    for point in ReceiptCheckpoint.objects.order_by("-seq")[:5]:
        reason = checkpoint_signature_problem(point.document(), keys=keys)
        if reason:
            problems.append(Problem("checkpoints", f"runs_receiptcheckpoint #{point.seq}", reason))
            continue
        stored = Receipt.objects.filter(seq=point.seq).values_list("id", "hash").first()
        if stored is None or stored[1] != point.head:
            problems.append(Problem("checkpoints", f"runs_receiptcheckpoint #{point.seq}",
                                    f"receipt #{point.seq} is gone or its hash differs from the signed checkpoint: "
                                    "the chain was rewritten or cut", point.seq, str(stored[0]) if stored else None))
            break
        since, prev = point.seq, point.head
        break
    checked, _seq, _head, walked, _ = _walk(keys=keys, from_seq=since + 1, start_prev=prev)
    return _result(since + checked, walked + problems, since=since or None)


def receipt_own_problems(receipt: Receipt, *, keys=None) -> list[str]:
    """What is wrong with this one receipt on its own (hash from its body, canonical v2 body, its
    run, its signature): the workbench badges check every receipt they show this way."""
    legacy_ok = False
    if not receipt.signature:  # only an unsigned receipt asks where signing began (badges check many a page)
        first = first_signed_seq()
        legacy_ok = (first is None or receipt.seq < first) and not ReceiptCheckpoint.objects.filter(
            seq__lt=receipt.seq).exists()
    return chain.check_receipt(_record_of(receipt), keys if keys is not None else signing.verifying_keys(),
                               legacy_ok=legacy_ok)

