"""Receipts as evidence files: JSON lines and CSV. One implementation for the API and the admin.

CSV cells that a spreadsheet would run as a formula are neutralised with a leading quote; the
JSON lines carry each receipt's body with its chain fields, key id and signature. What an auditor
verifies offline is an evidence bundle (runs.evidence): these files select by any filter, so they
are not a gap-free piece of the chain and carry neither the keys nor a signed manifest.
"""

import csv
import io
import json
from collections.abc import Iterable

from runs.models import Receipt

EXPORT_LIMIT = 10_000  # receipts per export file; a larger selection is exported in parts (export_part)
EXPORT_FORMATS = ("jsonl", "csv")
CSV_COLUMNS = ["seq", "id", "run_id", "created_at", "status", "agent", "caller", "hash", "prev_hash"]
MEDIA_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv"}


def export_part(queryset) -> tuple[list[Receipt], bool]:
    """The first EXPORT_LIMIT receipts of the selection in chain order, and whether more remain after them."""
    limit = EXPORT_LIMIT
    receipts = list(queryset.order_by("seq")[: limit + 1])
    return receipts[:limit], len(receipts) > limit


def neutralise(value) -> str:
    """A cell a spreadsheet would run as a formula is prefixed with a quote."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def receipt_jsonl_line(receipt: Receipt) -> str:
    return json.dumps({"id": str(receipt.id), "run_id": str(receipt.run_id), "seq": receipt.seq,
                       "prev_hash": receipt.prev_hash, "hash": receipt.hash, "body": json.loads(receipt.body),
                       "key_id": receipt.key_id, "signature": receipt.signature},
                      sort_keys=True, ensure_ascii=False)


def receipts_jsonl(receipts: Iterable[Receipt]) -> str:
    return "".join(f"{receipt_jsonl_line(r)}\n" for r in receipts)


def receipts_csv(receipts: Iterable[Receipt]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for r in receipts:
        body = json.loads(r.body)
        row = {"seq": r.seq, "id": r.id, "run_id": r.run_id, "created_at": r.created_at.isoformat(),
               "status": body["status"], "agent": body["agent"]["slug"], "caller": body["caller"]["username"],
               "hash": r.hash, "prev_hash": r.prev_hash}
        writer.writerow([neutralise(row[c]) for c in CSV_COLUMNS])
    return out.getvalue()


def receipts_export(receipts: Iterable[Receipt], *, format: str) -> str:
    """The export file's text in `format` ("jsonl" or "csv")."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}")
    return receipts_csv(receipts) if format == "csv" else receipts_jsonl(receipts)
