"""Every check of an evidence bundle (EVIDENCE-FORMAT v2), collected into one report."""

import hashlib
import json
from dataclasses import dataclass, field

from .approvals import Seen, approval_problem, called_problem, parse_time, sealed_changes, verify_approval_history
from .archive import BUNDLE_FILES
from .chain import (Failure, is_hex64, is_int, parse_jsonl, retired_bound_problem, verify_checkpoints,
                    verify_receipts, verify_traces)
from .jcs import CanonicalizationError
from .keys import KeySetError, load_key_set, merge_key_sets, retirement_of, verify_signature
from .legacy import AFTER_SIGNING, V1_APPROVAL_FIELDS, after_signing, is_legacy_body, legacy_note
from .messages import GENESIS, manifest_message
from .review_chain import REVIEW_FILE, is_review_checkpoint, verify_review_checkpoints, verify_review_file
from .trust_chain import TRUST_FILE, is_trust_checkpoint, verify_trust_checkpoints, verify_trust_file

# quorum, decisions, escalated_from_role and escalated_at appear only when they say something
# (more than one approver, people's decisions recorded, an escalation): absent on both sides otherwise.
APPROVAL_FIELDS = ("tool", "arguments_sha256", "approver_role", "decided_by", "decided_via", "decided_at", "reason",
                   "quorum", "decisions", "escalated_from_role", "escalated_at")
RUN_FIELDS = ("status", "input_sha256", "output_sha256")


@dataclass
class Report:
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the summary; a "WARNING:" note is worth a look, not a failure

    def fail(self, file: str, record: str, reason: str) -> None:
        self.failures.append(Failure(file, record, reason))


def verify_bundle(files: dict[str, bytes], *, trusted: dict | None = None, trusted_from: str = "",
                  witness: bytes | None = None, witness_name: str = "witness", workers: int = 1) -> Report:
    """Check a bundle's files. `trusted`: keys fetched out of band (--public-key); else keys.json."""
    report = Report()
    manifest = _manifest(files, report)
    bundled_keys = _bundled_keys(files, report)
    manifest_keys = trusted if trusted is not None else bundled_keys
    source = trusted_from or "keys.json inside the bundle (not independent of it: pass --public-key)"
    signed = False
    if manifest is not None:
        chain_of = manifest.get("chain") if isinstance(manifest.get("chain"), dict) else {}
        reason = verify_signature(manifest_keys, manifest.get("key_id"), manifest_message(manifest),
                                  manifest.get("signature")) or retired_bound_problem(
            manifest_keys, manifest.get("key_id"), seq=chain_of.get("head_seq"), dated=True,
            at=manifest.get("created_at"))
        if reason:
            report.fail("manifest.json", "signature", reason)
        else:
            signed = True
            report.notes.append(f"manifest signed by key {manifest.get('key_id')}, trusted from {source}")
    digests_before = len(report.failures)
    _file_digests(files, manifest, report)
    keys_json_intact = not any(f.file == "keys.json" for f in report.failures[digests_before:])
    if trusted is None:
        keys = bundled_keys
    elif signed and keys_json_intact:
        # The trusted key signed a manifest that pins keys.json's digest, so it vouches for the keys
        # listed there: keys rotated out earlier still verify the receipts they signed.
        keys = merge_key_sets(bundled_keys, trusted)
    else:
        keys = trusted  # nothing the trusted key signed vouches for keys.json: its keys stay unknown
    chain = (manifest or {}).get("chain") if isinstance((manifest or {}).get("chain"), dict) else {}
    complete = isinstance(manifest, dict) and isinstance(manifest.get("period"), dict) \
        and manifest["period"].get("to") is None
    span, bodies = _receipts(files, chain, keys, workers, complete, report)
    trusted_reads, seen = _events(files, bodies, workers, report)
    _approvals(files, bodies, report)
    _runs(files, bodies, report)
    found, note, reviews = verify_review_file(files.get(REVIEW_FILE), keys=keys, receipts=files.get("receipts.jsonl"),
                                              section=manifest.get("reviews") if isinstance(manifest, dict) else None)
    report.failures.extend(found)
    report.notes.append(note)
    found, note, trust = verify_trust_file(files.get(TRUST_FILE), keys=keys, trusted_reads=trusted_reads,
                                           section=manifest.get("trust") if isinstance(manifest, dict) else None)
    report.failures.extend(found)
    report.notes.append(note)
    report.failures.extend(verify_approval_history(seen, sealed_changes(files.get(TRUST_FILE))))
    _jsonl_only(files, "policies.jsonl", report)
    hash_at = dict(span.hashes)
    if is_hex64(chain.get("start_prev_hash")) and span.first_seq > 1:
        hash_at.setdefault(span.first_seq - 1, chain["start_prev_hash"])
    made_at = manifest.get("created_at") if isinstance(manifest, dict) else None
    sources = [("checkpoints.jsonl", files.get("checkpoints.jsonl"))]
    if witness is not None:
        sources.append((witness_name, witness))
    memo: dict = {}
    checkpoint_seqs: list = []
    for name, data in sources:
        if data is None:
            continue
        rows, bad = parse_jsonl(data, name)
        report.failures.extend(bad)
        # Every chain's heads go to the same witness: each line is held against its own chain.
        review_rows = [(number, row) for number, row in rows if is_review_checkpoint(row)]
        trust_rows = [(number, row) for number, row in rows if is_trust_checkpoint(row)]
        rows = [(number, row) for number, row in rows if not (is_review_checkpoint(row) or is_trust_checkpoint(row))]
        report.failures.extend(verify_checkpoints(
            [row for _, row in rows], keys=keys, hash_at=hash_at, first_seq=span.first_seq,
            last_seq=span.last_seq, head_seq=span.head_seq, complete=complete, file=name, made_at=made_at,
            labels=[f"line {number}" for number, _ in rows], workers=workers, memo=memo))
        report.failures.extend(verify_review_checkpoints(
            [row for _, row in review_rows], keys=keys, hash_at=reviews.hashes, head_seq=reviews.head_seq,
            made_at=made_at, file=name, labels=[f"line {number}" for number, _ in review_rows]))
        report.failures.extend(verify_trust_checkpoints(
            [row for _, row in trust_rows], keys=keys, hash_at=trust.hashes, head_seq=trust.head_seq,
            made_at=made_at, file=name, labels=[f"line {number}" for number, _ in trust_rows]))
        checkpoint_seqs += [row.get("seq") for _, row in rows]
        also = f" and {len(review_rows)} review checkpoints" if review_rows else ""
        also += f" and {len(trust_rows)} trust checkpoints" if trust_rows else ""
        report.notes.append(f"{len(rows)} checkpoints{also} in {name}")
    for seq in after_signing(span.legacy, checkpoint_seqs):
        report.fail("receipts.jsonl", f"seq {seq}", AFTER_SIGNING)
    report.notes.insert(0, f"{span.count} receipts (seq {span.first_seq}-{span.last_seq}), {len(bodies)} runs")
    statuses = _statuses(files)
    report.notes.append("receipt keys: " + (", ".join(f"{kid} ({_status(keys[kid], statuses.get(kid))})"
                                                     for kid in sorted(keys)) or "none"))
    report.notes.extend(f"WARNING: key {kid} is retired without a bound (retired_after_seq, retired_at): anyone "
                        "holding its private key can still sign receipts, checkpoints and manifests that pass"
                        for kid in sorted(keys) if _unbounded(keys[kid]))
    return report


def _status(key, listed: str | None) -> str:
    retirement = retirement_of(key)
    if retirement is None:
        return listed or "from --public-key"
    if retirement.after_seq is None:
        return "retired, no bound"
    return f"retired after #{retirement.after_seq}"


def _unbounded(key) -> bool:
    retirement = retirement_of(key)
    return retirement is not None and not retirement.bounded


def _statuses(files: dict[str, bytes]) -> dict[str, str]:
    try:
        entries = json.loads(files.get("keys.json", b"{}")).get("keys", [])
        return {str(entry.get("key_id")): str(entry.get("status")) for entry in entries if isinstance(entry, dict)}
    except (AttributeError, UnicodeDecodeError, ValueError, RecursionError):
        return {}


def _manifest(files: dict[str, bytes], report: Report) -> dict | None:
    data = files.get("manifest.json")
    if data is None:
        report.fail("manifest.json", "file", "missing: nothing in the bundle can be trusted without it")
        return None
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        report.fail("manifest.json", "file", f"not JSON ({str(exc)[:80]})")
        return None
    if not isinstance(manifest, dict):
        report.fail("manifest.json", "file", "not a JSON object")
        return None
    try:
        manifest_message(manifest)
    except (CanonicalizationError, UnicodeEncodeError) as exc:
        report.fail("manifest.json", "file", f"cannot be canonicalized ({exc})")
        return None
    if manifest.get("v") != 1 or manifest.get("kind") != "warrant.evidence-bundle":
        report.fail("manifest.json", "file", "not a v1 warrant.evidence-bundle manifest")
    return manifest


def _bundled_keys(files: dict[str, bytes], report: Report) -> dict:
    data = files.get("keys.json")
    if data is None:
        return {}
    try:
        return load_key_set(json.loads(data))
    except (UnicodeDecodeError, ValueError, RecursionError, KeySetError) as exc:
        report.fail("keys.json", "file", f"not a usable key set ({str(exc)[:120]})")
        return {}


def _file_digests(files: dict[str, bytes], manifest: dict | None, report: Report) -> None:
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict):
        if manifest is not None:
            report.fail("manifest.json", "files", "no table of file digests")
        listed = {}
    for name in BUNDLE_FILES:
        if name != "manifest.json" and name not in files:
            report.fail(name, "file", "missing from the bundle")
    for name, data in sorted(files.items()):
        if name == "manifest.json":
            continue
        # reviews.jsonl and trust.jsonl: in bundles made since review records and the trust chain
        if name not in BUNDLE_FILES and name not in (REVIEW_FILE, TRUST_FILE):
            report.fail(name, "file", "not a file of the evidence format (extra file)")
        if name not in listed:
            report.fail(name, "file", "not listed in the manifest, so nothing vouches for it")
        elif hashlib.sha256(data).hexdigest() != listed[name]:
            report.fail(name, "file", "sha256 differs from the manifest's: the file was changed after export")
    for name in sorted(set(listed) - set(files)):
        if name in BUNDLE_FILES:
            continue  # already reported missing
        report.fail(name, "file", "listed in the manifest but missing from the bundle")


@dataclass
class Span:
    first_seq: int
    last_seq: int
    head_seq: int
    count: int
    hashes: dict[int, str]
    legacy: list = field(default_factory=list)  # seqs of receipts shaped as from before signing


def _receipts(files, chain: dict, keys: dict, workers: int, complete: bool, report: Report):
    rows, bad = parse_jsonl(files.get("receipts.jsonl", b""), "receipts.jsonl")
    report.failures.extend(bad)
    records = [row for _, row in rows]
    first_seq = chain.get("first_seq")
    if not is_int(first_seq):
        first_seq = records[0].get("seq") if records and is_int(records[0].get("seq")) else 1
        report.fail("manifest.json", "chain", "no integer first_seq")
    start_prev = chain.get("start_prev_hash")
    if not is_hex64(start_prev):
        report.fail("manifest.json", "chain", "no start_prev_hash")
        start_prev = records[0].get("prev_hash") if records else GENESIS
    elif first_seq == 1 and start_prev != GENESIS:
        report.fail("manifest.json", "chain", "first_seq is 1 but start_prev_hash is not GENESIS")
    parsed: dict[int, dict] = {}  # the bodies the chain check parsed in this process, not parsed again below
    result = verify_receipts(records, keys=keys, start_seq=first_seq, start_prev=start_prev, workers=workers,
                             bodies=parsed)
    report.failures.extend(result.failures)
    last_seq, head_seq, head_hash = chain.get("last_seq"), chain.get("head_seq"), chain.get("head_hash")
    if not records and last_seq is None:
        last_seq = first_seq - 1  # an empty period
    if last_seq != result.head_seq:
        report.fail("receipts.jsonl", "file", f"the last receipt is seq {result.head_seq}, the manifest says "
                    f"last_seq {last_seq!r}: receipts were cut off or added")
    if not is_int(head_seq) or head_seq < result.head_seq:
        report.fail("manifest.json", "chain", f"head_seq {head_seq!r} is not at or past the last receipt")
        head_seq = result.head_seq
    elif complete and head_seq != result.head_seq:
        report.fail("manifest.json", "chain", f"the period runs to the head, but the head is seq {head_seq} "
                    f"and the bundle stops at seq {result.head_seq}: the tail was left out")
    if head_seq == result.head_seq and head_hash != result.head_hash:
        report.fail("manifest.json", "chain", "head_hash is not the last receipt's hash"
                    if records else "head_hash is not start_prev_hash, yet the bundle holds no receipt")
    bodies: dict[str, tuple[str, dict]] = {}
    for index, record in enumerate(records):
        try:
            body = parsed[index] if index in parsed else json.loads(record.get("body"))
        except (TypeError, ValueError, RecursionError):
            continue  # already reported by the chain check
        if not isinstance(body, dict) or not isinstance(record.get("run_id"), str):
            continue
        where = f"seq {record.get('seq')}"
        if record["run_id"] in bodies:
            report.fail("receipts.jsonl", where, f"second receipt for run {record['run_id']} "
                        f"(first at {bodies[record['run_id']][0]}): a run has exactly one")
            continue
        bodies[record["run_id"]] = (where, body)
    span = Span(first_seq=first_seq, last_seq=result.head_seq, head_seq=head_seq, count=result.checked,
                hashes=result.hashes)
    if result.legacy:
        report.notes.append(legacy_note(len(result.legacy), result.legacy[0], result.legacy[-1],
                                        pinned=result.signed))
    span.legacy = result.legacy
    return span, bodies


def _events(files, bodies, workers: int, report: Report) -> tuple[list[tuple[str, str]], list[Seen]]:
    """The traces against their receipts; (where, tool) of each tool result read as trusted, for the
    trust chain, and the approval each call that ran was under (warrant_verify.approvals)."""
    rows, bad = parse_jsonl(files.get("events.jsonl", b""), "events.jsonl")
    report.failures.extend(bad)
    by_run: dict[str, list[dict]] = {}
    trusted_reads, called, frozen = [], [], {}
    for _, row in rows:
        by_run.setdefault(str(row.get("run_id")), []).append(row)
        data = row.get("data") if isinstance(row, dict) else None
        if not isinstance(data, dict):
            continue
        if row.get("kind") == "run_created" and "frozen_at" in data:
            frozen[str(row.get("run_id"))] = data["frozen_at"]
        if row.get("kind") != "tool_call" or not isinstance(data.get("name"), str):
            continue
        where = f"run {row.get('run_id')} event {row.get('seq')}"
        if data.get("source_trusted") is True:
            trusted_reads.append((where, data["name"]))
        if "approval" in data:  # recorded since the offline approval check; older events carry none
            if problem := approval_problem(data["approval"]) or called_problem(data):
                report.fail("events.jsonl", where, problem)
            else:
                called.append(row)
    # A receipt from before signing sealed no trace (legacy.py): there is nothing to hold its events to.
    runs = [(by_run.get(run_id, []), {"run_id": body.get("run_id"), "trace": body.get("trace")})
            for run_id, (_, body) in bodies.items() if not is_legacy_body(body)]
    report.failures.extend(verify_traces(runs, workers=workers))
    return trusted_reads, _seen(called, bodies, frozen, report)


def _seen(called: list[dict], bodies, frozen: dict, report: Report) -> list[Seen]:
    """Each call's approval dated by its run's freeze (or, in older traces, its receipt's started_at)."""
    seen = []
    for row in called:
        run_id = str(row.get("run_id"))
        where, body = bodies.get(run_id, ("", {}))
        at = parse_time(frozen.get(run_id, body.get("started_at")))
        if at is None:
            if run_id in frozen:
                report.fail("events.jsonl", f"run {run_id}", "its run_created event's frozen_at is not a time")
            continue  # no receipt in the bundle, or one from before started_at: nothing to order it by
        seq = where.removeprefix("seq ")
        seen.append(Seen(at=at, order=(int(seq) if seq.isdigit() else 0, row.get("seq") if is_int(row.get("seq"))
                                       else 0), run_id=run_id, event=row.get("seq"), tool=row["data"]["name"],
                         requires_approval=row["data"]["approval"]["requires_approval"],
                         approver_role=row["data"]["approval"]["approver_role"]))
    return seen


def _approvals(files, bodies, report: Report) -> None:
    rows, bad = parse_jsonl(files.get("approvals.jsonl", b""), "approvals.jsonl")
    report.failures.extend(bad)
    by_id = {str(row.get("id")): (number, row) for number, row in rows}
    sealed: set[str] = set()
    for run_id, (where, body) in bodies.items():
        approvals = body.get("approvals")
        if not isinstance(approvals, list):
            report.fail("receipts.jsonl", where, "body has no approvals list")
            continue
        for sealed_row in approvals:
            if not isinstance(sealed_row, dict):
                report.fail("receipts.jsonl", where, "an approval in the body is not an object")
                continue
            approval_id = str(sealed_row.get("id"))
            sealed.add(approval_id)
            if approval_id not in by_id:
                report.fail("approvals.jsonl", f"approval {approval_id}", f"sealed in run {run_id}'s receipt "
                            "but missing from approvals.jsonl")
                continue
            _, row = by_id[approval_id]
            fields = APPROVAL_FIELDS if not is_legacy_body(body) else [n for n in APPROVAL_FIELDS
                                                                      if n in V1_APPROVAL_FIELDS]
            differing = [name for name in fields if row.get(name) != sealed_row.get(name)]
            if row.get("status") != sealed_row.get("decision"):
                differing.append("status")
            if row.get("run_id") != run_id:
                differing.append("run_id")
            if differing:
                report.fail("approvals.jsonl", f"approval {approval_id}",
                            f"{', '.join(differing)} differ from what run {run_id}'s receipt sealed")
    for approval_id, (number, row) in by_id.items():
        if approval_id not in sealed and str(row.get("run_id")) in bodies:
            report.fail("approvals.jsonl", f"approval {approval_id}",
                        f"not sealed in the receipt of its run {row.get('run_id')}")


def _runs(files, bodies, report: Report) -> None:
    rows, bad = parse_jsonl(files.get("runs.jsonl", b""), "runs.jsonl")
    report.failures.extend(bad)
    for number, row in rows:
        run_id = str(row.get("id"))
        if run_id not in bodies:
            report.fail("runs.jsonl", f"run {run_id}", "a terminal run with no receipt in the bundle")
            continue
        _, body = bodies[run_id]
        differing = [name for name in RUN_FIELDS if row.get(name) != body.get(name)]
        outcome = body.get("outcome")  # sealed since receipts list refusals; absent before
        if isinstance(outcome, dict):
            differing += [name for name, sealed in (("refused_count", "refused"), ("refused_kinds", "refused_kinds"))
                          if row.get(name) != outcome.get(sealed)]
        if differing:
            report.fail("runs.jsonl", f"run {run_id}", f"{', '.join(differing)} differ from what its receipt sealed")


def _jsonl_only(files, name: str, report: Report) -> None:
    _, bad = parse_jsonl(files.get(name, b""), name)
    report.failures.extend(bad)
