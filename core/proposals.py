"""Maker-checker proposals: what a golden case's and a sampling rule's proposals have in common.

A person's change that would loosen a control is written as a proposal and changes nothing. A
different person approves it (the change is then applied, and the proposal names both) or refuses
it; its proposer may withdraw it. Each app keeps what its proposals propose and who may confirm
them; the states, the people, the lock and the order of the checks are here. (A trust proposal,
agents.trust_models.TrustProposal, expires on a clock of its own and is decided in agents.trust.)
"""

from collections.abc import Callable

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from core.api_errors import Conflict, Forbidden
from core.four_eyes import check_fresh


def person(user):
    """`user` if a signed-in person; None for the platform (no user, or an anonymous one), whose
    changes are made at once rather than proposed."""
    return user if user is not None and getattr(user, "is_authenticated", False) else None


class ProposalStale(Conflict):
    """What the proposal would change has changed since it was made: it is proposed again."""

    code = "proposal_stale"


class NotPending(Conflict):
    code = "proposal_decided"


class Proposal(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REFUSED = "refused"
        WITHDRAWN = "withdrawn"

    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-id"]
        default_permissions = ("view",)


# check_second(user, proposal, what, details): refuse `user` as the second person (core.four_eyes).
SecondCheck = Callable[[object, Proposal, str, dict], None]


def _locked(proposal: Proposal) -> Proposal:
    locked = type(proposal).objects.select_for_update().get(pk=proposal.pk)
    if locked.status != Proposal.Status.PENDING:
        raise NotPending(f"proposal {locked.pk} was {locked.status} already", details={"proposal": locked.pk})
    return locked


def _decided(proposal: Proposal, status: str, user) -> Proposal:
    proposal.status, proposal.decided_by, proposal.decided_at = status, user, timezone.now()
    proposal.save(update_fields=["status", "decided_by", "decided_at"])
    return proposal


def approve(proposal: Proposal, *, user, what: str, check_second: SecondCheck,
            apply: Callable[[Proposal, dict], None]) -> Proposal:
    """A second person applies the proposal, in one transaction with the proposal locked: not the
    proposer (check_second), within the window (core.four_eyes.check_fresh), then `apply(locked,
    details)`, which raises ProposalStale if its target moved on since."""
    details = {"proposal": proposal.pk}
    with transaction.atomic():
        locked = _locked(proposal)
        check_second(user, locked, what, details)
        check_fresh(locked.created_at, what=what, details=details)
        apply(locked, details)
        return _decided(locked, Proposal.Status.APPROVED, user)


def refuse(proposal: Proposal, *, user, what: str, check_second: SecondCheck) -> Proposal:
    """Another person turns the proposal down (its proposer withdraws it instead)."""
    with transaction.atomic():
        locked = _locked(proposal)
        check_second(user, locked, f"refusing {what}", {"proposal": locked.pk, "hint": "the proposer withdraws it"})
        return _decided(locked, Proposal.Status.REFUSED, user)


def withdraw(proposal: Proposal, *, user, refuser: str) -> Proposal:
    """Its proposer takes it back; `refuser` names who refuses it instead ("governance admin")."""
    with transaction.atomic():
        locked = _locked(proposal)
        if locked.proposed_by_id != getattr(user, "pk", None):
            raise Forbidden(f"only its proposer may withdraw a proposal; another {refuser} refuses it",
                            details={"proposal": locked.pk})
        return _decided(locked, Proposal.Status.WITHDRAWN, user)
