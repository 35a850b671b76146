"""The review services: assign a sampled run to a reviewer, and append a reviewer's record to
the signed review chain. The only writers of ReviewItem.assignee/state and of ReviewRecord.

Independence: a run is never reviewed by its caller, nor by anyone who decided an approval inside
it; both are checked when assigning and again when a record is submitted. A record, once
written, is never changed (the model, the database's triggers, and the chain's hashes and
signatures each refuse or reveal a change): a finding is answered by follow-ups.
"""

import logging
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from core.api_errors import Conflict, DomainError, Forbidden
from core.permissions import compliance_role, in_role
from review.models import ReviewItem, ReviewRecord
from review.sealing import seal_next
from review.witness import review_head, witness_after_commit
from runs.models import ApprovalDecision, ApprovalRequest
from runs.verification_receipt import receipt_verify
from warrant_verify.review_chain import FORMAT, review_message

logger = logging.getLogger(__name__)
_CHAIN_LOCK = 0x52455657  # "REVW": serialises appends to the review chain on PostgreSQL
MAX_NOTE = 20_000
State, Kind = ReviewItem.State, ReviewRecord.Kind


@dataclass(frozen=True)
class Ineligible:
    code: str  # caller, approver, not_compliance, inactive
    message: str


def refusal(field: str, message: str) -> DomainError:
    """A 400 in the shape of a serializer's: the field, and why (a rule no schema states)."""
    return DomainError(message, details={field: [message]})


def _iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


def approvers_of(run) -> set[int]:
    """Everyone who decided an approval of the run: each decision row, and the request's decider."""
    requests = ApprovalRequest.objects.filter(run=run)
    deciders = set(requests.exclude(decided_by=None).values_list("decided_by_id", flat=True))
    return deciders | set(ApprovalDecision.objects.filter(approval__run=run).values_list("user_id", flat=True))


def ineligible(item: ReviewItem, user) -> Ineligible | None:
    """Why `user` may not review this run (None: they may)."""
    if not (user and user.is_active):
        return Ineligible("inactive", "the reviewer's account is not active")
    if not in_role(user, compliance_role()):
        return Ineligible("not_compliance", f"reviewers are members of the {compliance_role()} role")
    if user.pk == item.run.caller_id:
        return Ineligible("caller", "the run's own caller may not review it")
    if user.pk in approvers_of(item.run):
        return Ineligible("approver", "someone who decided an approval inside the run may not review it")
    return None


def _locked(item: ReviewItem) -> ReviewItem:
    return ReviewItem.objects.select_for_update().select_related("run", "receipt").get(pk=item.pk)


def review_assign(*, item: ReviewItem, assignee, by) -> ReviewItem:
    """Give the sampled run to `assignee` (or take it back to the pool with None)."""
    if not (by.is_superuser or in_role(by, compliance_role())):
        raise Forbidden(f"only the {compliance_role()} role assigns reviews")
    with transaction.atomic():
        item = _locked(item)
        if item.state in (State.SIGNED_OFF, State.RESOLVED):
            raise Conflict(f"the review is closed ({item.state})", details={"state": item.state})
        if assignee is not None:
            why = ineligible(item, assignee)
            if why:
                raise refusal("assignee", why.message)
        open_state = State.FINDING_OPEN if item.state == State.FINDING_OPEN else (
            State.ASSIGNED if assignee else State.UNASSIGNED)
        item.assignee, item.assigned_by, item.assigned_at, item.state = (
            assignee, by if assignee else None, timezone.now() if assignee else None, open_state)
        item.save(update_fields=["assignee", "assigned_by", "assigned_at", "state"])
    return item


def _next_state(item: ReviewItem, kind: str, resolves: bool) -> str:
    """Where the review stands after a record of `kind`; a Conflict where it may not be written."""
    if kind == Kind.SIGN_OFF:
        if item.state != State.ASSIGNED:
            raise Conflict("a sign-off comes before any finding; a finding is closed by a follow-up that resolves it",
                           details={"state": item.state})
        return State.SIGNED_OFF
    if kind == Kind.FINDING:
        return State.FINDING_OPEN
    if item.state != State.FINDING_OPEN:
        raise Conflict("a follow-up answers an open finding", details={"state": item.state})
    return State.RESOLVED if resolves else State.FINDING_OPEN


def _follows(item: ReviewItem, kind: str, follows) -> ReviewRecord | None:
    if kind != Kind.FOLLOW_UP:
        if follows is not None:
            raise refusal("follows", "only a follow-up follows a record")
        return None
    chosen = (ReviewRecord.objects.filter(item=item, kind__in=[Kind.FINDING, Kind.FOLLOW_UP]).order_by("-seq")
              if follows is None else ReviewRecord.objects.filter(item=item, pk=follows)).first()
    if chosen is None or chosen.kind == Kind.SIGN_OFF:
        raise refusal("follows", "a follow-up follows a finding or follow-up of the same review")
    return chosen


def _validate(kind: str, severity: str, note: str) -> None:
    if kind not in Kind.values:
        raise refusal("kind", f"kind is one of {', '.join(Kind.values)}")
    if kind == Kind.FINDING and severity not in ReviewRecord.Severity.values:
        raise refusal("severity", "a finding has a severity: " + ", ".join(ReviewRecord.Severity.values))
    if kind != Kind.FINDING and severity:
        raise refusal("severity", "only a finding has a severity")
    if kind != Kind.SIGN_OFF and not note.strip():
        raise refusal("note", "a finding or follow-up says what was found or done in its note")
    if len(note) > MAX_NOTE:
        raise refusal("note", f"the note is longer than {MAX_NOTE} characters")


def review_submit(*, item: ReviewItem, reviewer, kind: str, note: str = "", severity: str = "", follows=None,
                  resolves: bool = False, via: str = "session") -> ReviewRecord:
    """Append the reviewer's record to the review chain; the item's state follows it."""
    _validate(kind, severity, note)
    if resolves and kind != Kind.FOLLOW_UP:
        raise refusal("resolves", "only a follow-up resolves a finding")
    with transaction.atomic():
        item = _locked(item)
        if item.assignee_id != reviewer.pk:
            raise Forbidden("only the review's assignee submits its records", details={"assignee": item.assignee_id})
        why = ineligible(item, reviewer)
        if why:
            raise Forbidden(why.message, details={"reason": why.code})
        state = _next_state(item, kind, resolves)
        earlier = _follows(item, kind, follows)
        checked = receipt_verify(receipt=item.receipt)
        record = _append(item, reviewer, kind=kind, severity=severity, note=note, follows=earlier, resolves=resolves,
                         via=via, verification={"valid": checked.valid, "reason": checked.reason})
        item.state = state
        item.save(update_fields=["state"])
    return record


def _roles(user) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def record_body(record: ReviewRecord, item: ReviewItem, reviewer, *, via: str, verification: dict) -> dict:
    return {
        "v": FORMAT,
        "record_id": str(record.id),
        "run_id": str(item.run_id),
        "item_id": str(item.id),
        "receipt": {"seq": item.receipt.seq, "hash": item.receipt.hash},
        "sampled": [{"rule": r.get("rule"), "reason": r.get("reason"), "detail": r.get("detail")} for r in item.reasons],
        "reviewer": {"username": reviewer.get_username(), "roles": _roles(reviewer), "via": via},
        "kind": record.kind,
        "severity": record.severity or None,
        "note": record.note,
        "follows": str(record.follows_id) if record.follows_id else None,
        "resolves": record.resolves,
        "verification": verification,
        "at": _iso(record.created_at),
    }


def _append(item, reviewer, *, kind, severity, note, follows, resolves, via, verification) -> ReviewRecord:
    record = ReviewRecord(item=item, run_id=item.run_id, reviewer=reviewer, kind=kind, severity=severity, note=note,
                          follows=follows, resolves=resolves, created_at=timezone.now().replace(microsecond=0))
    sealed = seal_next(lock=_CHAIN_LOCK, head=review_head, message=review_message,
                       body=record_body(record, item, reviewer, via=via, verification=verification),
                       record_id=str(record.id), run_id=str(item.run_id))
    record.seq, record.prev_hash, record.hash, record.body, record.key_id, record.signature = (
        sealed.seq, sealed.prev_hash, sealed.hash, sealed.body, sealed.key_id, sealed.signature)
    record.save()  # AppendOnlyModel: an INSERT, never an update
    witness_after_commit(sealed.seq, sealed.hash)
    return record


def user_named(username: str):
    return get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username}).first()
