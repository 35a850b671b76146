"""Trust marks: whose words a run may read without being tainted.

A tool result is outsiders' text unless governance admins said otherwise: a ticket's title, a
mail, a wiki page or anything an MCP server or an OpenAPI service answers can carry orders the
screen does not know. So every tool's output is untrusted by default, and reading it taints the
run (runs.harness). A discovered tool follows its source's mark (ToolSource.trusted); a built-in
tool has its own (Tool.trusted_output).

Tightening is one governance admin's act and takes effect at once (tool_source_trust and tool_trust
with trusted=False). Loosening takes two: marking something trusted lifts the approval every side
effect of a run that read it would need, so one governance admin proposes it (trust_propose, a
TrustProposal that changes nothing) and a different one confirms it (trust_confirm, the four-eyes
check of core.four_eyes) within WARRANT["TRUST_PROPOSAL_HOURS"]; only then is the mark set. The
proposer may withdraw a pending proposal, another governance admin may refuse it. The platform's
own act (load_demo: platform=True, no user) stays one step.

Each change of a mark writes a TrustChange (who, when, from what to what, why, and who proposed
it) in the transaction of the change, and so does each confirmed approval or re-approval proposal
(record_confirmed: the approval before and after), and each one-step tightening of an approval
(record_tightened). The row is sealed into the trust chain as it is
written (signed, hash-chained, witnessed: review.trust_chain), so a change removed or rewritten
afterwards, by a DBA or anyone else, is caught by the review chain's verification and by the
offline verifier, which also refuses a mark of trust, an approval change or a re-approval by a
person that names no second one (an approval change by one person only if it tightens).
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from agents.models import Tool, ToolSource, TrustChange, TrustProposal
from core.api_errors import Conflict, Forbidden
from core.four_eyes import RequestExpired, check_second_admin
from core.permissions import is_governance_admin

logger = logging.getLogger(__name__)
# Seals a change into the trust chain and inserts it: review.trust_chain.seal_trust_change, put here
# by review.apps (agents imports no app above it).
SEAL: list = []
Subject = TrustChange.Subject
Outcome = TrustProposal.Outcome
Kind = TrustProposal.Kind
_NOUN = {Subject.TOOL_SOURCE: "tool source", Subject.TOOL: "tool"}


class ProposalRequired(Conflict):
    """A person asked to mark something trusted in one step: that takes a proposal and a second admin."""

    code = "trust_proposal_required"


def proposal_hours() -> float:
    """How long a proposal waits for its second admin (WARRANT_TRUST_PROPOSAL_HOURS, by default the
    window of every four-eyes request, WARRANT_SECOND_ADMIN_WINDOW_HOURS: 24)."""
    return settings.WARRANT["TRUST_PROPOSAL_HOURS"]


def _check(user) -> None:
    if not is_governance_admin(user):
        raise Forbidden("only governance admins may change what Warrant trusts")


def _sealer():
    if not SEAL:  # an unsealed change is the gap the chain closes: refuse it rather than write one
        raise ImproperlyConfigured("no trust chain is registered (review.apps): trust marks cannot be changed, "
                                   "nor approvals loosened")
    return SEAL[0]


def _record(*, subject: str, name: str, trusted: bool, was: bool, user, reason: str,
            proposal: TrustProposal | None = None) -> TrustChange:
    change = _sealer()(TrustChange(subject=subject, name=name, trusted=trusted, was_trusted=was,
                                 changed_by=user if getattr(user, "pk", None) else None, reason=reason,
                                 proposed_by=proposal.proposed_by if proposal else None), proposal=proposal)
    logger.info("trust mark of %s %s: %s -> %s by %s%s", subject, name, was, trusted,
                getattr(user, "username", None) or "the platform",
                f", proposed by {proposal.proposed_by.username}" if proposal else "")
    return change


def record_confirmed(proposal: TrustProposal, *, user, before: dict, after: dict) -> TrustChange:
    """Seal what a confirmed approval or re-approval proposal wrote (agents.trust_approval calls it,
    in the transaction of the write): the target's approval, or its approved fingerprint, `before`
    and `after`, the proposer and the confirmer. A DBA's UPDATE of the proposal or the tool
    afterwards leaves this record as it was."""
    return _sealer()(TrustChange(kind=proposal.kind, subject=proposal.subject, name=proposal.name, before=before,
                                 after=after, changed_by=user, proposed_by=proposal.proposed_by,
                                 reason=proposal.reason), proposal=proposal)


def record_tightened(*, subject: str, name: str, before: dict, after: dict, user, reason: str = "") -> TrustChange:
    """Seal one governance admin's (or the platform's, `user` None) tightening of an approval
    (agents.trust_approval.approval_tightened calls it, in the transaction of the write): one
    person, no proposal. Sealed so that the server holds the live approval to it: without it, an
    UPDATE that undid the tightening would leave the approval as the newest sealed change said."""
    return _sealer()(TrustChange(kind=TrustChange.Kind.APPROVAL, subject=subject, name=name, before=before,
                                 after=after, changed_by=user if getattr(user, "pk", None) else None,
                                 reason=reason), proposal=None)


def _one_step(user, *, what: str, trusted: bool, platform: bool) -> None:
    if trusted and not platform:
        raise ProposalRequired(f"marking {what} trusted takes two governance admins: propose it, and another "
                               "governance admin confirms it", details={"name": what})


def _set(target: ToolSource | Tool, *, trusted: bool, user, reason: str,
         proposal: TrustProposal | None) -> tuple[ToolSource | Tool, TrustChange | None]:
    """Lock the target and change its mark, sealing the change; (the target, the change or None)."""
    field = "trusted" if isinstance(target, ToolSource) else "trusted_output"
    target = type(target).objects.select_for_update().get(pk=target.pk)
    was, change = getattr(target, field), None
    if was != trusted:
        change = _record(subject=Subject.TOOL_SOURCE if field == "trusted" else Subject.TOOL, name=target.name,
                         trusted=trusted, was=was, user=user, reason=reason, proposal=proposal)
        setattr(target, field, trusted)
        target.save(update_fields=[field, "updated_at"])
    return target, change


@transaction.atomic
def tool_source_trust(*, source: ToolSource, trusted: bool, user, reason: str = "",
                      platform: bool = False) -> ToolSource:
    """Mark what a source's tools say (descriptions and results) untrusted, at once. Trusted only by
    the platform; a person proposes it (trust_propose)."""
    if not platform:
        _check(user)
    _one_step(user, what=f"the tool source {source.name}", trusted=trusted, platform=platform)
    return _set(source, trusted=trusted, user=user, reason=reason, proposal=None)[0]


def _built_in(tool: Tool) -> None:
    if tool.tool_source_id:
        raise Conflict(f"{tool.name} comes from the source {tool.tool_source.name}: mark the source instead",
                       details={"tool_source": tool.tool_source.name})


@transaction.atomic
def tool_trust(*, tool: Tool, trusted: bool, user, reason: str = "", platform: bool = False) -> Tool:
    """Mark a built-in tool's results untrusted, at once. Trusted only by the platform (`platform`:
    the demo loader's own act, no user, still recorded); a person proposes it (trust_propose)."""
    if not platform:
        _check(user)
    _built_in(tool)
    _one_step(user, what=f"the tool {tool.name}", trusted=trusted, platform=platform)
    return _set(tool, trusted=trusted, user=user, reason=reason, proposal=None)[0]


def _target(subject: str, name: str, *, lock: bool = False) -> ToolSource | Tool:
    model = ToolSource if subject == Subject.TOOL_SOURCE else Tool
    rows = model.objects.select_for_update() if lock else model.objects.all()
    target = rows.filter(name=name).first()
    if target is None:
        raise Conflict(f"there is no {_NOUN[subject]} {name} any more", details={"name": name})
    return target


def _is_trusted(target) -> bool:
    return target.trusted if isinstance(target, ToolSource) else target.trusted_output


@transaction.atomic
def trust_propose(*, target: ToolSource | Tool, user, reason: str = "") -> TrustProposal:
    """Propose marking a tool source or a built-in tool trusted. Nothing changes until another
    governance admin confirms it (trust_confirm)."""
    _check(user)
    subject = Subject.TOOL_SOURCE if isinstance(target, ToolSource) else Subject.TOOL
    target = _target(subject, target.name, lock=True)
    if subject == Subject.TOOL:
        _built_in(target)
    if _is_trusted(target):
        raise Conflict(f"the {_NOUN[subject]} {target.name} is trusted already", details={"name": target.name})
    return proposal_open(TrustProposal(kind=Kind.TRUST, subject=subject, name=target.name, reason=reason), user=user)


def proposal_what(proposal: TrustProposal) -> str:
    """What the proposal would do, in words: "marking the tool x trusted", "loosening the approval of ..."."""
    noun = _NOUN[proposal.subject] if proposal.kind == Kind.TRUST else proposal.subject.replace("_", " ")
    if proposal.kind == Kind.TRUST:
        return f"marking the {noun} {proposal.name} trusted"
    if proposal.kind == Kind.CHANGE:
        return (f"re-approving what the source of the tool {proposal.name} says now (fingerprint "
                f"{str(proposal.change.get('sha256'))[:12]})")
    said = ", ".join(f"{field} {proposal.was.get(field)!r} -> {value!r}" for field, value in proposal.change.items())
    return f"loosening the approval of the {noun} {proposal.name} ({said})"


def proposal_open(proposal: TrustProposal, *, user) -> TrustProposal:
    """Save an unsaved proposal as its proposer's, pending, unless one of its kind for the same target
    still stands (409); an expired one gives way to it. Inside the caller's transaction, target locked."""
    pending = TrustProposal.objects.select_for_update().filter(kind=proposal.kind, subject=proposal.subject,
                                                               name=proposal.name, outcome=Outcome.PENDING).first()
    if pending is not None and pending.state == Outcome.PENDING:
        raise Conflict(f"{proposal_what(pending)} is proposed already (proposal {pending.pk}): confirm, refuse or "
                       "withdraw that one", details={"proposal": pending.pk})
    if pending is not None:  # expired: it no longer stands, and it gives way to this one
        pending.outcome = Outcome.EXPIRED
        pending.save(update_fields=["outcome"])
    proposal.proposed_by, proposal.created_at = user, timezone.now()
    proposal.proposer_roles = sorted(user.groups.values_list("name", flat=True))
    proposal.expires_at = proposal.created_at + timedelta(hours=proposal_hours())
    proposal.save(force_insert=True)
    return proposal


def _pending(proposal: TrustProposal) -> TrustProposal:
    proposal = TrustProposal.objects.select_for_update().select_related("proposed_by").get(pk=proposal.pk)
    if proposal.outcome != Outcome.PENDING:
        raise Conflict(f"proposal {proposal.pk} is {proposal.outcome} already", details={"proposal": proposal.pk})
    return proposal


def _decide(proposal: TrustProposal, outcome: str, user, change: TrustChange | None = None) -> TrustProposal:
    proposal.outcome, proposal.decided_by, proposal.decided_at = outcome, user, timezone.now()
    proposal.change_seq = change.seq if change is not None else None
    proposal.save(update_fields=["outcome", "decided_by", "decided_at", "change_seq"])
    return proposal


@transaction.atomic
def trust_confirm(*, proposal: TrustProposal, user) -> TrustProposal:
    """A second governance admin confirms: the mark is set, or for an approval or a re-approval
    proposal its change is made (agents.trust_approval), and the sealed change names both."""
    proposal = _pending(proposal)
    what = proposal_what(proposal)
    check_second_admin(user, what=what, parties=[(proposal.proposed_by, "proposed it")],
                       details={"proposal": proposal.pk})
    if proposal.state == "expired":
        raise RequestExpired(f"{what} was proposed more than {proposal_hours():g} hours ago and can no longer be "
                              "confirmed; propose it again", details={"proposal": proposal.pk})
    if proposal.kind != Kind.TRUST:
        from agents.trust_approval import proposal_write  # it imports this module (and agents.sources does too)

        return _decide(proposal, Outcome.CONFIRMED, user, proposal_write(proposal, user=user))
    target = _target(proposal.subject, proposal.name)
    _, change = _set(target, trusted=True, user=user, reason=proposal.reason, proposal=proposal)
    return _decide(proposal, Outcome.CONFIRMED, user, change)


@transaction.atomic
def trust_refuse(*, proposal: TrustProposal, user) -> TrustProposal:
    """Another governance admin turns a pending proposal down (its proposer withdraws it instead)."""
    proposal = _pending(proposal)
    check_second_admin(user, what=f"refusing proposal {proposal.pk} ({proposal_what(proposal)})",
                       parties=[(proposal.proposed_by, "proposed it and may withdraw it")],
                       details={"proposal": proposal.pk})
    return _decide(proposal, Outcome.REFUSED, user)


@transaction.atomic
def trust_withdraw(*, proposal: TrustProposal, user) -> TrustProposal:
    """The proposer takes a pending proposal back."""
    proposal = _pending(proposal)
    if getattr(user, "pk", None) != proposal.proposed_by_id:
        raise Forbidden("only its proposer may withdraw a proposal; another governance admin refuses it",
                        details={"proposal": proposal.pk})
    return _decide(proposal, Outcome.WITHDRAWN, user)
