"""The trust chain's writer: each TrustChange sealed in the transaction that makes it, its head given
to the witness sinks, the same way as a review record (review.sealing, review.witness). A change is
a trust mark's (agents.trust) or what a confirmed approval or re-approval proposal wrote
(agents.trust_approval): the body's kind says which (warrant_verify.trust_chain).

agents.trust calls seal_trust_change through agents.trust.SEAL, which review.apps fills (agents
imports no app above it); with nothing there agents.trust refuses the change rather than write it
unsealed. The records are signed with the receipt key, so whoever holds it could rewrite the chain
consistently; the witness keeps the heads they cannot take back (as review.witness explains).
"""

from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.models import TrustChange
from review.sealing import seal_next
from review.witness import witness_after_commit
from runs import witness
from warrant_verify.messages import GENESIS
from warrant_verify.trust_chain import (APPROVAL_KIND, FORMAT, KIND, REAPPROVAL_KIND, TRUST_CHECKPOINT_KIND,
                                        trust_checkpoint_message, trust_message)

_CHAIN_LOCK = 0x54525354  # "TRST": serialises appends to the trust chain on PostgreSQL
COLUMNS = ("seq", "prev_hash", "hash", "body", "key_id", "signature")  # a record as trust.jsonl holds it
BODY_KINDS = {TrustChange.Kind.TRUST: KIND, TrustChange.Kind.APPROVAL: APPROVAL_KIND,
              TrustChange.Kind.CHANGE: REAPPROVAL_KIND}  # a row's kind -> its body's


def _iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


def trust_head(model=TrustChange) -> tuple[int, str]:
    """(seq, hash) of the newest sealed change. `model`: the migration's historical one."""
    newest = model.objects.filter(seq__isnull=False).order_by("-seq").values_list("seq", "hash").first()
    return newest or (0, GENESIS)


def _person(user, roles: list[str] | None) -> dict:
    return {"username": getattr(user, get_user_model().USERNAME_FIELD), "roles": roles}


def trust_body(change, *, roles: list[str] | None, proposal=None, version: int = FORMAT) -> dict:
    """What is sealed of a change. `roles`: those the changer held when they made it (None: not
    known, for a change recorded before the chain). From v2 the body also says who proposed what
    the changer confirmed (`proposal`, agents.TrustProposal), with the roles they held and when, or
    null when one step was enough; v1 (the changes sealed before proposals, and migration 0009's)
    has no proposed_by. A mark's body says from what mark to what; an approval change's or a
    re-approval's (always v2, always proposed) the `before` and `after` its row holds."""
    by = change.changed_by
    kind = getattr(change, "kind", TrustChange.Kind.TRUST)  # migration 0009's model has no kind: all marks
    body = {"v": version, "kind": BODY_KINDS[kind], "subject": change.subject, "name": change.name,
            "reason": change.reason, "at": _iso(change.changed_at), "changed_by": _person(by, roles) if by else None}
    if kind == TrustChange.Kind.TRUST:
        body |= {"trusted": change.trusted, "was_trusted": change.was_trusted}
    else:
        body |= {"before": change.before, "after": change.after}
    if version >= 2:
        body["proposed_by"] = None if proposal is None else {
            **_person(proposal.proposed_by, list(proposal.proposer_roles)), "at": _iso(proposal.created_at)}
    return body


def _seal(change, model, *, roles: list[str] | None, proposal=None, version: int = FORMAT) -> None:
    sealed = seal_next(lock=_CHAIN_LOCK, head=lambda: trust_head(model), message=trust_message,
                       body=trust_body(change, roles=roles, proposal=proposal, version=version))
    change.seq, change.prev_hash, change.hash, change.body, change.key_id, change.signature = (
        sealed.seq, sealed.prev_hash, sealed.hash, sealed.body, sealed.key_id, sealed.signature)


def seal_trust_change(change: TrustChange, *, proposal=None) -> TrustChange:
    """Seal an unsaved change as the chain's next record and insert it, inside the caller's
    transaction; the witness is given the new head once that commits. `proposal`: the confirmed
    TrustProposal the change comes from (a mark of trust, an approval change, a re-approval)."""
    change.changed_at = timezone.now().replace(microsecond=0)  # the body's "at" and the column agree to the second
    by = change.changed_by
    _seal(change, TrustChange, roles=sorted(by.groups.values_list("name", flat=True)) if by else None,
          proposal=proposal)
    change.save(force_insert=True)
    witness_after_commit(change.seq, change.hash, TRUST_CHAIN)
    return change


def seal_earlier(model) -> int:
    """Migration agents 0009: the changes recorded before the chain, sealed in the order they were
    made (roles unknown). The witness is not called here: the reconciler gives the sinks the head."""
    count = 0
    for change in model.objects.filter(seq__isnull=True).select_related("changed_by").order_by("changed_at", "id"):
        _seal(change, model, roles=None, version=1)  # from before proposals: v1, as sealed then
        change.save(update_fields=["seq", "prev_hash", "hash", "body", "key_id", "signature"])
        count += 1
    return count


def _made_at(seq: int):
    return TrustChange.objects.filter(seq=seq).values_list("changed_at", flat=True).first()


TRUST_CHAIN = witness.WitnessedChain(name="trust", kind=TRUST_CHECKPOINT_KIND, message=trust_checkpoint_message,
                                     head=trust_head, made_at=_made_at)
