"""Receipts: the one writer of the signed hash chain (evidence format v2, docs/evidence.md).

hash = sha256(prev_hash + body), body = RFC 8785 canonical JSON, seq gap-free from 1; the
signature (Ed25519, runs.signing) covers seq, prev_hash, hash, key id and run id. Sealing happens
in the same transaction that moves the run to its terminal status; the witness is given the new
head after that transaction commits, and never holds the run up. Verification: runs.verification.
"""

import hashlib
from functools import partial

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.dispatch import Signal

from governance.drafts import emergency_marks
from runs import outcome_refusals, signing, witness
from runs.approval_evidence import DECISION_ORDER, EXTRA_COLUMNS, add_extras
from runs.models import ApprovalRequest, Receipt, Run
from runs.standing import receipt_entries
from runs.trace import trace_head_of
from warrant_verify.jcs import canonicalize
from warrant_verify.messages import GENESIS, receipt_hash, receipt_message

_CHAIN_LOCK = 0x57415252  # "WARR": the advisory lock that serialises appends on PostgreSQL
FORMAT = 2
# Sent in the run's final transaction as its receipt is sealed, with run, receipt and body (the dict
# sealed): review.sampling and triggers listen (runs imports no app above it, so it tells instead of
# calling). Sent before the receipt joins the chain, outside the chain's lock: the receipt has its
# id, run, body and key, not yet its seq, hash or signature, and is inserted after the listeners
# return. A row a listener writes that refers to it (a review item) is checked against it at the
# commit, as every foreign key is (Django makes them deferred, on PostgreSQL and SQLite).
receipt_sealed = Signal()


def canonical(value) -> str:
    """The RFC 8785 text of a JSON value."""
    return canonicalize(value).decode("utf-8")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, body: str) -> str:
    return receipt_hash(prev_hash, body)


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


_APPROVAL_COLUMNS = ("id", "tool", "arguments_sha256", "approver_role__name", "status", "decided_by", "decided_via",
                     "decided_at", "reason")


def _approval_columns() -> tuple[str, ...]:
    return tuple(f"decided_by__{get_user_model().USERNAME_FIELD}" if c == "decided_by" else c
                 for c in _APPROVAL_COLUMNS)


def approvals_of(run_id) -> list[dict]:
    """The run's approval requests as the receipt binds them: who decided, how they logged in, why."""
    return approvals_by_run([run_id]).get(str(run_id), [])


def approvals_by_run(run_ids) -> dict[str, list[dict]]:
    """approvals_of for many runs in one query."""
    return approvals_where(run_id__in=run_ids)


def approvals_where(**approval_filter) -> dict[str, list[dict]]:
    """Run id -> approvals_of for the approval requests matching `approval_filter` (verification
    reads a chunk's by its receipts' seq range: a join, where an IN list of 2,000 run ids costs
    more to build than the query takes)."""
    found: dict[str, list[dict]] = {}
    # One statement: each request joined with its decisions (quorum, each person's decision,
    # escalation: runs.approval_evidence), the request's own columns taken from its first row.
    columns = _approval_columns()
    rows = (ApprovalRequest.objects.filter(**approval_filter).order_by("created_at", "id", *DECISION_ORDER)
            .values_list("run_id", *columns, *EXTRA_COLUMNS))
    listed: dict[str, dict] = {}
    for run_id, *row in rows:
        id_, tool, digest, role, status, decided_by, via, decided_at, reason = row[:len(columns)]
        if str(id_) not in listed:
            listed[str(id_)] = {"id": str(id_), "tool": tool, "arguments_sha256": digest, "approver_role": role,
                                "decision": status, "decided_by": decided_by, "decided_via": via,
                                "decided_at": _iso(decided_at), "reason": reason}
            found.setdefault(str(run_id), []).append(listed[str(id_)])
        add_extras(listed, str(id_), *row[len(columns):])
    return found


def receipt_body(run: Run) -> dict:
    state, snapshot = run.state, run.snapshot
    fired, seen = [], set()
    for decision in state.get("fired", []):
        key = (decision["policy_id"], decision["version"])
        if key not in seen:
            seen.add(key)
            fired.append({"id": decision["policy_id"], "version": decision["version"], "type": decision["type"]})
    skills = {s["name"]: s for s in snapshot.get("skills", [])}
    events, head = trace_head_of(run)
    refused = outcome_refusals.of_run(run)
    wall_ms = int((run.finished_at - run.started_at).total_seconds() * 1000) if run.started_at and run.finished_at else 0
    return {
        "v": FORMAT,
        "run_id": str(run.id),
        "agent": {
            "slug": snapshot["agent"]["slug"],
            "version": snapshot["agent"]["version"],
            "hash": snapshot["agent"]["sha256"],
        },
        "caller": {"username": snapshot["caller"]["username"], "roles": snapshot["caller"]["roles"]},
        # A run nobody typed: its trigger, schedule fire or delivery, and the payload's digest (triggers/).
        **({"origin": snapshot["origin"]} if "origin" in snapshot else {}),
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "error": run.error or None,
        "tainted": run.tainted,
        "input_sha256": sha256(run.input),
        "output_sha256": sha256(run.output),
        "policy_snapshot_sha256": run.policy_snapshot_sha256,
        "policies_fired": fired,
        # Policies and skills frozen while in force without a passing golden set, and why (governance.drafts).
        **({"emergency": marks} if (marks := emergency_marks(snapshot, state.get("active_skills", []))) else {}),
        "skills_used": [
            {"name": n, "version": skills[n]["version"], "sha256": skills[n]["sha256"]}
            for n in state.get("active_skills", []) if n in skills
        ],
        "model_calls": [_model_call(c) for c in state.get("model_calls", [])],
        "tool_calls": [
            {k: c[k] for k in ("name", "ok", "code", "duration_ms", "approval_id", "standing_approval_id") if k in c}
            for c in state.get("tool_log", [])
        ],
        # The standing approvals its calls ran under (runs.standing), each once: no query without one.
        "standing_approvals": _standing_used(state),
        # A run that never parked has no approval requests: no query for them (see RunState.parks).
        "approvals": approvals_of(run.id) if state.get("parks", 1) else [],
        # What the run set out to do and was refused, with why; the outcome says whether it did it all.
        "refused": refused,
        "outcome": outcome_refusals.outcome(run.status, refused),
        "trace": {"events": events, "head": head},
        "totals": {
            "llm_calls": run.llm_calls,
            "tool_calls": run.tool_calls,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "wall_ms": wall_ms,
        },
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


def _standing_used(state: dict) -> list[dict]:
    ids = list(dict.fromkeys(c["standing_approval_id"] for c in state.get("tool_log", [])
                             if c.get("standing_approval_id")))
    if not ids:
        return []
    calls = [c.get("standing_approval_id") for c in state.get("tool_log", [])]
    return [entry | {"calls": calls.count(entry["id"])} for entry in receipt_entries(ids)]


# Recorded since real backends arrived; runs from before have none of them.
_MODEL_CALL_EXTRAS = {"requested_backend": None, "profile": None, "cache_read_tokens": 0, "cache_creation_tokens": 0,
                      "tokens_estimated": None, "attempts": 1, "outcome": "ok"}


def _model_call(call: dict) -> dict:
    """Requested and actual model and backend of one call, so a fallback is visible in the receipt."""
    body = {k: call[k] for k in ("requested_model", "actual_model", "backend", "input_tokens", "output_tokens",
                                 "latency_ms")}
    return body | {k: call.get(k, default) for k, default in _MODEL_CALL_EXTRAS.items()}


def _lock_chain() -> None:
    # SQLite serialises writers already (IMMEDIATE transactions); PostgreSQL needs the lock, and
    # the unique seq and hash columns reject a fork even if it were skipped.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])


def receipt_seal(*, run: Run) -> Receipt:
    """Append the signed receipt of a terminal run to the chain. Call inside the terminal transaction."""
    assert transaction.get_connection().in_atomic_block, "receipts are sealed inside the run's final transaction"
    # Sealed once: only the move to a terminal status calls this, and a run leaves no terminal
    # status. A second seal would break the one-to-one column and roll the transaction back.
    sealed = receipt_body(run)
    body = canonical(sealed)
    key_id, _key = signing.signing_key()
    receipt = Receipt(run=run, body=body, key_id=key_id)  # its id is set: listeners may refer to it
    # The listeners go before the chain's lock, which is held from its statement to the commit:
    # what they read (review's sampling rules) does not keep every other run's end waiting.
    receipt_sealed.send(sender=Receipt, run=run, receipt=receipt, body=sealed)
    _lock_chain()
    last_seq, prev_hash = chain_head()
    seq, hash_ = last_seq + 1, receipt_hash(prev_hash, body)
    receipt.seq, receipt.prev_hash, receipt.hash = seq, prev_hash, hash_
    receipt.signature = signing.sign(receipt_message(seq=seq, prev_hash=prev_hash, hash=hash_, key_id=key_id,
                                                     run_id=str(run.id)))
    receipt.save(force_insert=True)  # an INSERT, never an update: receipts are append-only
    # After commit, outside the run's transaction: a witness that is down never holds a run up.
    transaction.on_commit(partial(witness.after_seal, seq, hash_), robust=True)
    return receipt


def chain_head() -> tuple[int, str]:
    """(seq, hash) of the newest receipt; (0, GENESIS) for an empty chain."""
    return Receipt.objects.order_by("-seq").values_list("seq", "hash").first() or (0, GENESIS)


# Verification lives in runs.verification; these names stay importable from here.
from runs.verification import Verification, receipt_verify_chain  # noqa: E402
from runs.verification_receipt import receipt_verify  # noqa: E402

__all__ = ["GENESIS", "Verification", "canonical", "chain_hash", "chain_head", "receipt_body", "receipt_seal",
           "receipt_verify", "receipt_verify_chain"]
