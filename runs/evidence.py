"""Evidence bundles: a period of receipts with everything needed to check them offline.

A bundle is a contiguous piece of the receipt chain (the receipts of the runs that finished in
the period, and every receipt between them) with what those receipts bind: the runs' trace
events, their approval rows, the runs themselves, the signed checkpoints, the policy versions in
force, the public keys and a page for a person to read; manifest.json, signed with the receipt
key, holds the sha256 of every other file. The layout is the evidence format v2
(docs/evidence.md); `python -m warrant_verify BUNDLE` checks it with nothing but `cryptography`.

Rows go out as the database holds them now, never recomputed from the receipts: a run, event or
approval edited after sealing must reach the verifier as edited. They are read in chunks and
written as they come, so a year of receipts never sits in memory.
"""

import hashlib
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.db.models import Max, Min
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.permissions import reads_everything
from runs import evidence_rows
from runs.access_log import receipt_access_record
from runs.evidence_rows import iso
from runs.evidence_summary import Tally, summary_html
from runs.models import Receipt, ReceiptAccess
from runs.receipts import chain_head
from runs.signing import key_set_document, sign, signing_key
from warrant_verify.messages import GENESIS, manifest_message

BUNDLE_FILES = ("receipts.jsonl", "events.jsonl", "checkpoints.jsonl", "approvals.jsonl", "policies.jsonl",
                "runs.jsonl", "reviews.jsonl", "trust.jsonl", "keys.json", "summary.html", "manifest.json")
# The signed record chains beside the receipts (the review chain, the trust chain), from review (runs
# imports no app above it): review.apps puts each here as (file, manifest section, a callable giving
# (rows, summary)), the summary being what the signed manifest says of the file.
RECORD_CHAINS: list[tuple[str, str, object]] = []
LINES_PER_CHUNK = 500


class EvidencePeriodError(ValueError):
    """A period bound that is not an ISO 8601 date, or a period that ends before it starts."""


class EvidenceAccessDenied(PermissionError):
    """A bundle is a contiguous piece of everyone's chain: only a user who reads every receipt takes one."""


class EvidenceTargetError(ValueError):
    """Where the bundle was to go already holds files (the verifier refuses extra files)."""


def evidence_period_bound(*, text: str, name: str) -> datetime:
    """A period bound from an ISO 8601 date (midnight) or date and time; UTC unless it names an offset."""
    try:
        value = parse_datetime(text.strip())
    except ValueError:  # well formed, but no such day or hour
        value = None
    shown = text if len(text) <= 40 else text[:40] + "…"
    if value is None:
        raise EvidencePeriodError(f"{name}: {shown!r} is not an ISO 8601 date or date and time "
                                  "(e.g. 2026-01-31 or 2026-01-31T09:30:00Z)")
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:  # the database compares in UTC: 0001-01-01T00:00+01:00 has no UTC time
        value.astimezone(UTC)
    except OverflowError:
        raise EvidencePeriodError(f"{name}: {shown!r} falls outside the years 1 to 9999 in UTC") from None
    return value


@dataclass(frozen=True)
class EvidencePlan:
    """Which piece of the chain a bundle holds, fixed before any file is written."""

    period_from: datetime | None
    period_to: datetime | None
    first_seq: int
    last_seq: int
    start_prev_hash: str
    head_seq: int
    head_hash: str
    created_at: datetime

    @property
    def receipts(self) -> int:
        return self.last_seq - self.first_seq + 1

    def chain(self) -> dict:
        return {"first_seq": self.first_seq, "last_seq": self.last_seq, "start_prev_hash": self.start_prev_hash,
                "head_seq": self.head_seq, "head_hash": self.head_hash}

    def access_query(self) -> str:
        """The period and the piece of the chain, for the receipt access log."""
        return (f"created_after={iso(self.period_from) or ''}&created_before={iso(self.period_to) or ''}"
                f"&seq={self.first_seq}-{self.last_seq}&head={self.head_seq}")


def evidence_bundle_plan(*, created_after: datetime | None = None,
                         created_before: datetime | None = None) -> EvidencePlan:
    """The receipts sealed in [created_after, created_before), as one gap-free piece of the chain.

    A run is sealed in the transaction that ends it, so these are the runs that finished in the
    period. The receipt's time is taken, not the run's finished_at: receipts are append-only
    (triggers refuse an edit), runs are not, and a run moved out of the period by an edit must not
    take its receipt out of the bundle. The head is read first and bounds everything after it, so
    receipts sealed while the bundle is written stay out of it whole."""
    if created_after and created_before and created_after >= created_before:
        raise EvidencePeriodError("the period must start before it ends (created_after before created_before)")
    created_at = timezone.now()  # before the head is read: a checkpoint signed after this is not in the piece
    head_seq, head_hash = chain_head()
    sealed = Receipt.objects.filter(seq__lte=head_seq)
    first, last = 1, head_seq
    if created_after is not None:
        first = sealed.filter(created_at__gte=created_after).aggregate(seq=Min("seq"))["seq"] or head_seq + 1
    if created_before is not None:
        last = sealed.filter(created_at__lt=created_before).aggregate(seq=Max("seq"))["seq"] or 0
    # Nothing finished in the period: an empty piece, placed where the period sits in the chain.
    first = min(first, last + 1)
    start_prev_hash = GENESIS
    if first > 1:
        # The link into the piece is the hash of the receipt before it as the database holds it, so
        # the signed manifest pins the piece to the rest of the chain.
        start_prev_hash = (Receipt.objects.filter(seq=first - 1).values_list("hash", flat=True).first()
                           or Receipt.objects.filter(seq=first).values_list("prev_hash", flat=True).first()
                           or GENESIS)
    return EvidencePlan(period_from=created_after, period_to=created_before, first_seq=first, last_seq=last,
                        start_prev_hash=start_prev_hash, head_seq=head_seq, head_hash=head_hash,
                        created_at=created_at)


def _jsonl(rows) -> Iterator[bytes]:
    """JSON lines in chunks; a row is a dict, or a line its reader encoded already."""
    lines = []
    for row in rows:
        lines.append(row if isinstance(row, str) else
                     json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
        if len(lines) == LINES_PER_CHUNK:
            yield ("\n".join(lines) + "\n").encode("utf-8")
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode("utf-8")


def _digested(name: str, chunks, digests: dict) -> Iterator[bytes]:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
        yield chunk
    digests[name] = digest.hexdigest()


def _document(make) -> Iterator[bytes]:
    """A file made only when it is reached: the summary and the manifest need the rows written before them."""
    yield make()


def _manifest(plan: EvidencePlan, digests: dict, sections: dict) -> bytes:
    key_id, _ = signing_key()
    # Always six digits of microseconds: the verifier compares checkpoint times with this as text.
    made_at = plan.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    manifest = {"v": 1, "kind": "warrant.evidence-bundle", "created_at": made_at,
                "period": {"from": iso(plan.period_from), "to": iso(plan.period_to)},
                "chain": plan.chain(), "files": dict(digests), "key_id": key_id}
    manifest |= sections  # each record chain's extent ("reviews", "trust"), signed with the rest
    manifest["signature"] = sign(manifest_message(manifest))
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _files(plan: EvidencePlan, *, requested_by) -> Iterator[tuple[str, Iterator[bytes]]]:
    """(name, chunks) for every file of the bundle in order, the manifest last."""
    digests: dict[str, str] = {}
    tally = Tally(plan=plan, requested_by=requested_by.get_username())
    chains = {name: (section, *rows_and_summary()) for name, section, rows_and_summary in RECORD_CHAINS}
    contents = {
        "receipts.jsonl": _jsonl(evidence_rows.receipts(plan, tally)),
        "events.jsonl": _jsonl(evidence_rows.events(plan, tally)),
        "checkpoints.jsonl": _jsonl(evidence_rows.checkpoints(plan, tally)),
        "approvals.jsonl": _jsonl(evidence_rows.approvals(plan, tally)),
        "policies.jsonl": _jsonl(evidence_rows.policies(plan, tally)),
        "runs.jsonl": _jsonl(evidence_rows.runs(plan, tally)),
        **{name: _jsonl(rows) for name, (_section, rows, _summary) in chains.items()},
        "keys.json": _document(lambda: (json.dumps(key_set_document(), indent=2, sort_keys=True) + "\n").encode()),
        "summary.html": _document(lambda: summary_html(tally).encode("utf-8")),
    }
    for name, chunks in contents.items():
        yield name, _digested(name, chunks, digests)
    yield "manifest.json", _document(lambda: _manifest(
        plan, digests, {section: summary() for section, _rows, summary in chains.values()}))


class _Sink:
    """What zipfile writes into: the bytes are taken out as they come, for a response to stream."""

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def _zip_chunks(files) -> Iterator[bytes]:
    sink = _Sink()
    # Not seekable, so zipfile writes each entry's sizes after its data; zip64 because a year's
    # events can pass 4 GiB and an entry's size is not known when it starts.
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, chunks in files:
            with archive.open(name, "w", force_zip64=True) as entry:
                for chunk in chunks:
                    entry.write(chunk)
                    if data := sink.take():
                        yield data
    if data := sink.take():
        yield data


def _write_directory(out_dir: Path, files) -> None:
    for name, chunks in files:
        with open(out_dir / name, "xb") as handle:
            for chunk in chunks:
                handle.write(chunk)


def _begin(*, created_after, created_before, requested_by, channel: str, note: str = "") -> EvidencePlan:
    if not reads_everything(requested_by):
        raise EvidenceAccessDenied("an evidence bundle holds every receipt of its period; "
                                   "only compliance (or a superuser) may export one")
    plan = evidence_bundle_plan(created_after=created_after, created_before=created_before)
    # Recorded before a byte is written: an export that breaks off was still taken.
    receipt_access_record(user=requested_by, action=ReceiptAccess.Action.EXPORT, channel=channel, format="bundle",
                          count=plan.receipts, query=plan.access_query() + (f"&{note}" if note else ""))
    return plan


def evidence_bundle_stream(*, created_after: datetime | None = None, created_before: datetime | None = None,
                           requested_by, channel: str = "api") -> tuple[EvidencePlan, Iterator[bytes]]:
    """The bundle as zip bytes, made as they are read (for a streaming response). The plan, the
    permission and the access log are settled before this returns; the rows are read as the bytes are."""
    plan = _begin(created_after=created_after, created_before=created_before, requested_by=requested_by,
                  channel=channel)
    return plan, _zip_chunks(_files(plan, requested_by=requested_by))


def evidence_bundle_write(*, out_dir: Path | None = None, zip_target: BinaryIO | None = None,
                          created_after: datetime | None = None, created_before: datetime | None = None,
                          requested_by, channel: str = "command", note: str = "") -> EvidencePlan:
    """Write the bundle into a new or empty directory, or as a zip into a writable binary file.

    `note` goes into the access log's query too (the command's: the operating system login)."""
    if (out_dir is None) == (zip_target is None):
        raise TypeError("give out_dir or zip_target, not both")
    if out_dir is not None:
        out_dir = Path(out_dir)
        if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
            raise EvidenceTargetError(f"{out_dir} is not an empty directory: a bundle holds its own files only")
    plan = _begin(created_after=created_after, created_before=created_before, requested_by=requested_by,
                  channel=channel, note=note)
    files = _files(plan, requested_by=requested_by)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_directory(out_dir, files)
    else:
        for data in _zip_chunks(files):
            zip_target.write(data)
    return plan
