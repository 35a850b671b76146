"""The rows of an evidence bundle's JSON lines files, read in chunks (runs.evidence writes them).

Every row is what the database holds now: the verifier compares the runs, events and approval
rows with what the signed receipts bind, so nothing here may be taken from a receipt's body.
"""

import hashlib
import json
from json.encoder import encode_basestring
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from governance.models import PolicyVersion
from runs.approval_evidence import approval_extras
from runs.models import ApprovalRequest, Receipt, ReceiptCheckpoint, Run, RunEvent
from runs.states import TERMINAL
from warrant_verify.review_chain import is_review_checkpoint
from warrant_verify.trust_chain import is_trust_checkpoint

CHUNK = 2000
_string = encode_basestring  # a JSON string literal, non-ASCII kept as UTF-8


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC ending in Z, as receipt bodies write time (runs.receipts), so a row and the
    body it is checked against compare equal."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _in_piece(plan) -> dict:
    return {"run__receipt__seq__gte": plan.first_seq, "run__receipt__seq__lte": plan.last_seq}


def receipts(plan, tally):
    rows = (Receipt.objects.filter(seq__gte=plan.first_seq, seq__lte=plan.last_seq).order_by("seq")
            .values_list("id", "run_id", "seq", "prev_hash", "hash", "body", "key_id", "signature", "created_at"))
    for id_, run_id, seq, prev_hash, hash_, body, key_id, signature, created_at in rows.iterator(chunk_size=CHUNK):
        tally.receipts += 1
        yield {"id": str(id_), "run_id": str(run_id), "seq": seq, "prev_hash": prev_hash, "hash": hash_, "body": body,
               "key_id": key_id, "signature": signature, "created_at": iso(created_at)}


def events(plan, tally):
    """Lines already encoded: the data is the column's JSON text as stored, never decoded and encoded
    again (events are most of a bundle's rows). It comes first, so no key it might smuggle in can
    stand in for the line's own: a JSON object's later duplicate wins, and text that is not JSON
    makes the line fail to parse, which the verifier names."""
    rows = (RunEvent.objects.filter(**_in_piece(plan)).order_by("run__receipt__seq", "seq")
            .values_list("run_id", "seq", "step", "kind", Cast("data", TextField()), "hash"))
    line = '{"data":%s,"hash":%s,"kind":%s,"run_id":"%s","seq":%d,"step":%d}'
    for run_id, seq, step, kind, data, hash_ in rows.iterator(chunk_size=CHUNK):
        tally.events += 1
        yield line % (data, _string(hash_), _string(kind), run_id, seq, step)


def approvals(plan, tally):
    decider = f"decided_by__{get_user_model().USERNAME_FIELD}"
    # The receipt body lists a run's approvals in this order (runs.receipts.receipt_body).
    rows = (ApprovalRequest.objects.filter(**_in_piece(plan)).order_by("run__receipt__seq", "created_at", "id")
            .values_list("id", "run_id", "tool", "arguments_sha256", "approver_role__name", "status", decider,
                         "decided_via", "decided_at", "reason"))
    # Quorum, each person's decision and escalation, as the receipt sealed them (runs.approval_evidence).
    extras = approval_extras(**_in_piece(plan))
    for id_, run_id, tool, digest, role, status, decided_by, via, decided_at, reason in rows.iterator(chunk_size=CHUNK):
        row = {"id": str(id_), "run_id": str(run_id), "tool": tool, "arguments_sha256": digest, "approver_role": role,
               "status": status, "decided_by": decided_by, "decided_via": via, "decided_at": iso(decided_at),
               "reason": reason} | extras.get(str(id_), {})
        tally.approval(row)
        yield row


def runs(plan, tally):
    """The runs of the piece's receipts, then the terminal runs that finished in the period without one."""
    columns = ("id", "status", "input", "output", "tainted", "taint_reason", "agent__slug", "finished_at", "refused_count",
               "refused_kinds")
    sealed = (Receipt.objects.filter(seq__gte=plan.first_seq, seq__lte=plan.last_seq).order_by("seq")
              .values_list(*(f"run__{c}" for c in columns)))
    unsealed = Run.objects.filter(status__in=TERMINAL, receipt__isnull=True)
    if plan.period_from:
        unsealed = unsealed.filter(finished_at__gte=plan.period_from)
    if plan.period_to:
        unsealed = unsealed.filter(finished_at__lt=plan.period_to)
    unsealed = unsealed.order_by("finished_at", "id").values_list(*columns)
    for has_receipt, rows in ((True, sealed), (False, unsealed)):
        for (id_, status, input_, output, tainted, taint_reason, agent, finished_at, refused_count,
             refused_kinds) in rows.iterator(chunk_size=CHUNK):
            row = {"id": str(id_), "status": status, "input_sha256": _sha256(input_), "output_sha256": _sha256(output),
                   "refused_count": refused_count, "refused_kinds": refused_kinds, "has_receipt": has_receipt}
            tally.run(row, tainted=tainted, taint_reason=taint_reason, agent=agent, finished_at=iso(finished_at))
            yield row


def policies(plan, tally):
    """Each policy's version in force when the period starts, then every change made in it."""
    rows = PolicyVersion.objects.order_by("policy_id", "policy_name", "changed_at", "id")
    if plan.period_to:
        rows = rows.filter(changed_at__lt=plan.period_to)
    rows = rows.values_list("id", "policy_id", "policy_name", "version", "action", "old_values", "new_values",
                            f"changed_by__{get_user_model().USERNAME_FIELD}", "changed_at")
    for _, history in groupby(rows.iterator(chunk_size=CHUNK), key=lambda r: r[1] if r[1] is not None else r[2]):
        in_force = None
        for row in history:
            if plan.period_from and row[8] < plan.period_from:
                in_force = row
                continue
            if in_force is not None and in_force[4] != PolicyVersion.Action.DELETE:
                yield _policy_row(in_force, tally)
            in_force = None
            yield _policy_row(row, tally)
        if in_force is not None and in_force[4] != PolicyVersion.Action.DELETE:
            yield _policy_row(in_force, tally)


def _policy_row(row, tally) -> dict:
    id_, policy_id, name, version, action, old_values, new_values, changed_by, changed_at = row
    tally.policy_versions += 1
    return {"id": id_, "policy_id": policy_id, "policy_name": name, "version": version, "action": action,
            "values": new_values if new_values is not None else old_values, "changed_by": changed_by,
            "changed_at": iso(changed_at)}


def checkpoints(plan, tally):
    """The signed checkpoints from the link into the piece (first_seq - 1) on: the database's, then those of the
    witness file that the database does not hold (deleted there, or never written). The witness file's review and
    trust checkpoints signed before the bundle began go in too (the bundle holds both chains whole)."""
    stored = ReceiptCheckpoint.objects.filter(seq__gte=plan.first_seq - 1, seq__lte=plan.head_seq).order_by("seq")
    for checkpoint in stored.iterator(chunk_size=CHUNK):
        tally.checkpoints += 1
        yield checkpoint.document()
    path = Path(settings.WARRANT_WITNESS_FILE) if settings.WARRANT_WITNESS_FILE else None
    if path is None:
        return
    tally.witness_file = str(path)
    if not path.is_file():
        return
    with path.open("rb") as handle:
        batch = []
        for line in handle:
            entry = _witness_entry(line, plan, tally)
            if entry is not None and _of_record_chain(entry):
                tally.review_checkpoints += is_review_checkpoint(entry)
                yield entry
            elif entry is not None:
                batch.append(entry)
            if len(batch) == CHUNK:
                yield from _not_stored(batch, tally)
                batch = []
        yield from _not_stored(batch, tally)


def _witness_entry(line: bytes, plan, tally) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:  # a torn last line (a crash mid-append) is not a checkpoint
        tally.witness_unreadable += bool(line.strip())
        return None
    if _of_record_chain(entry):
        return entry if _signed_before(entry, plan.created_at) else None
    if not isinstance(entry, dict) or entry.get("kind") != "warrant.checkpoint" or type(entry.get("seq")) is not int:
        tally.witness_unreadable += 1
        return None
    # One past the head stays in when it was signed before the bundle began: the tail it names
    # is gone from the database. Later ones are receipts sealed while the bundle is written.
    if entry["seq"] < plan.first_seq - 1 or (entry["seq"] > plan.head_seq and not _signed_before(entry, plan.created_at)):
        return None
    return entry


def _of_record_chain(entry) -> bool:
    """A checkpoint of the review or the trust chain (not kept in the database: the witness holds them)."""
    return is_review_checkpoint(entry) or is_trust_checkpoint(entry)


def _signed_before(entry: dict, moment) -> bool:
    try:
        at = parse_datetime(str(entry.get("at")))
    except ValueError:
        at = None
    return at is not None and at.tzinfo is not None and at <= moment


def _not_stored(batch: list[dict], tally):
    if not batch:
        return
    stored = set(ReceiptCheckpoint.objects.filter(seq__in={e["seq"] for e in batch})
                 .values_list("seq", "head", "signature"))
    for entry in batch:
        if (entry["seq"], entry.get("head"), entry.get("signature")) not in stored:
            tally.checkpoints += 1
            tally.witness_only += 1
            yield entry
