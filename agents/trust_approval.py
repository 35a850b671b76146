"""Loosening a tool's approval takes two governance admins; tightening it takes one.

A tool that requires approval waits, at every call, for a member of its approver role, whatever the
policies say; a tool source's approver role is the one its side-effecting tools are given when a sync
discovers them. One governance admin who lifts `requires_approval`, or points the approver role at a
role of their choosing (or at none), frees the calls those approvers stood in front of. So that
loosening is a proposal (a TrustProposal of kind "approval", the trust proposals' four-eyes path:
agents.trust) that changes nothing, and a different governance admin confirms it within
WARRANT["TRUST_PROPOSAL_HOURS"]; only then is it written, and the confirmed proposal names both,
with the approval before and after. Tightening (requiring approval, naming a role where there was
none) stays one step, and so does the platform's own act (load_demo, bootstrap: no person, no check).

Re-approving a held tool's change is the same kind of act when its source is trusted: two governance
admins vouched for what that source says, so its new words (a description, a schema) would reach the
model untainted on one admin's word, and an admin who also controls the server could write them and
approve them alone. So it is a proposal of kind "change", made with the approve-change route or
action, and the change is accepted (agents.sources.tool_change_approve) when another confirms it. An
untrusted source's tool is re-approved by one: its description taints every run that is shown it
(governance.taint), whatever its words.

What a confirmation writes is sealed into the trust chain in the same transaction (a TrustChange of
kind "approval" or "change", agents.trust.record_confirmed): the approval, or the approved
fingerprint, before and after, who proposed it and who confirmed it. A one-step tightening is sealed
too (kind "approval", before and after, no proposer: approval_tightened), though it loosens nothing:
the server holds each live approval to the newest sealed change of it, and an UPDATE that undid an
unsealed tightening would leave the approval just as the sealed loosening before it said.
"""

import logging

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from agents import services, sources
from agents.models import Tool, ToolSource, TrustChange, TrustProposal
from agents.trust import Subject, _check, _target, proposal_open, proposal_what, record_confirmed, record_tightened
from core.api_errors import Conflict
from core.approver_roles import unstaffed_problem

logger = logging.getLogger(__name__)
Kind = TrustProposal.Kind


class OneProposalAtATime(Conflict):
    """A request that would both propose a mark of trust and loosen an approval."""

    code = "one_proposal_at_a_time"


def approval_state(target: Tool | ToolSource) -> dict:
    """The approval a tool (requires_approval and approver_role) or a source (approver_role) has now, by name."""
    state = {"approver_role": target.approver_role.name if target.approver_role_id else None}
    if isinstance(target, Tool):
        state["requires_approval"] = target.requires_approval
    return state


def approval_loosening(target: Tool | ToolSource, values: dict) -> dict:
    """Takes out of `values` (a person's change; roles as Group or None) what loosens the target's approval,
    and returns it by name: lifting a tool's requires_approval, changing or clearing a set approver role.
    What is left tightens it or leaves it as it is, and is one governance admin's to make."""
    change = {}
    if isinstance(target, Tool) and target.requires_approval and values.get("requires_approval") is False:
        change["requires_approval"] = values.pop("requires_approval")
    if "approver_role" in values and target.approver_role_id is not None \
            and getattr(values["approver_role"], "pk", None) != target.approver_role_id:
        role = values.pop("approver_role")
        change["approver_role"] = role.name if role is not None else None
    return change


def approval_looser(before: dict, after: dict) -> bool:
    """Whether going from `before` to `after` (approval_state) loosens: requires_approval lifted, or a
    set approver role changed or cleared (what approval_loosening takes out of a change)."""
    if before.get("requires_approval") and not after.get("requires_approval"):
        return True
    return before.get("approver_role") is not None and after.get("approver_role") != before.get("approver_role")


def approval_tightened(target: Tool | ToolSource, before: dict, *, user, reason: str = "") -> TrustChange | None:
    """Seal the target's approval as a one-step write left it (inside that write's transaction, the row
    locked), when it is stricter than `before`; a write that left it as it was, or loosened it (a
    confirmed proposal, sealed by approval_write), seals nothing here."""
    after = approval_state(target)
    if after == before or approval_looser(before, after):
        return None
    return record_tightened(subject=_subject(target), name=target.name, before=before, after=after, user=user,
                            reason=reason)


def _subject(target: Tool | ToolSource) -> str:
    return Subject.TOOL if isinstance(target, Tool) else Subject.TOOL_SOURCE


def _check_end(target: Tool | ToolSource, change: dict) -> None:
    """The approval the change leaves must be one a run can meet (as tool_update would refuse it later)."""
    end = approval_state(target) | change
    if end.get("requires_approval") and end["approver_role"] is None:
        raise ValidationError({"approver_role": [services.REQUIRES_APPROVAL_NEEDS_ROLE]})


@transaction.atomic
def approval_propose(*, target: Tool | ToolSource, user, change: dict, reason: str = "") -> TrustProposal:
    """Propose loosening the target's approval as `change` says (from approval_loosening). Nothing
    changes until another governance admin confirms it (agents.trust.trust_confirm)."""
    _check(user)
    subject = _subject(target)
    target = _target(subject, target.name, lock=True)
    _check_end(target, change)
    return proposal_open(TrustProposal(kind=Kind.APPROVAL, subject=subject, name=target.name, change=change,
                                       was=approval_state(target), reason=reason), user=user)


def approval_write(proposal: TrustProposal, *, user) -> TrustChange:
    """Write a confirmed approval proposal (agents.trust.trust_confirm calls it, the four-eyes check made)
    on the target as it is now, locked, and seal it: refused (409) if its approval is no longer what was
    proposed against, or the role it names is gone or has nobody in it."""
    target = _target(proposal.subject, proposal.name, lock=True)
    what = proposal_what(proposal)
    if approval_state(target) != proposal.was:
        raise Conflict(f"{what}: its approval changed since it was proposed (it is now {approval_state(target)}); "
                       "propose it again", details={"proposal": proposal.pk})
    values = dict(proposal.change)
    if values.get("approver_role") is not None:
        role = Group.objects.filter(name=values["approver_role"]).first()
        problem = f"there is no role {values['approver_role']!r} any more" if role is None else unstaffed_problem(role)
        if problem:
            raise Conflict(f"{what}: {problem}", details={"proposal": proposal.pk})
        values["approver_role"] = role
    if isinstance(target, Tool):
        target = services.tool_update(tool=target, values=values)
    else:
        target.approver_role = values["approver_role"]
        target.save(update_fields=["approver_role", "updated_at"])
    change = record_confirmed(proposal, user=user, before=proposal.was, after=approval_state(target))
    logger.info("%s: proposed by %s, confirmed by %s (trust change #%s)", what, proposal.proposed_by.username,
                user.username, change.seq)
    return change


def reapproval_proposed(tool: Tool) -> bool:
    """Whether re-approving the tool's held change takes a second governance admin: its source is trusted."""
    return bool(tool.tool_source_id) and tool.tool_source.trusted


def _waiting(tool: Tool) -> dict:
    change = tool.pending_change or {}
    if not tool.held or not change.get("sha256"):
        raise Conflict(f"{tool.name} has no change waiting for approval", details={"name": tool.name})
    return change


@transaction.atomic
def change_propose(*, tool: Tool, user, reason: str = "") -> TrustProposal:
    """Propose re-approving what a trusted source's held tool says now. Nothing changes until another
    governance admin confirms it; a change reported after this one is not covered by it."""
    _check(user)
    tool = _target(Subject.TOOL, tool.name, lock=True)
    change = _waiting(tool)
    return proposal_open(TrustProposal(kind=Kind.CHANGE, subject=Subject.TOOL, name=tool.name,
                                       change={"sha256": change["sha256"]},
                                       was={"approved_sha256": tool.approved_sha256}, reason=reason), user=user)


def change_write(proposal: TrustProposal, *, user) -> TrustChange:
    """Accept the held change a confirmed proposal names, if it is still the one waiting (409 if not),
    and seal it."""
    tool = _target(Subject.TOOL, proposal.name, lock=True)
    if (tool.pending_change or {}).get("sha256") != proposal.change["sha256"] or not tool.held \
            or tool.approved_sha256 != proposal.was["approved_sha256"]:
        raise Conflict(f"{proposal_what(proposal)}: the change waiting for approval is no longer the one proposed; "
                       "propose it again", details={"proposal": proposal.pk})
    tool = sources.tool_change_approve(tool=tool, user=user)
    change = record_confirmed(proposal, user=user, before={"approved_sha256": proposal.was["approved_sha256"]},
                              after={"approved_sha256": tool.approved_sha256})
    logger.info("%s: proposed by %s, confirmed by %s (trust change #%s)", proposal_what(proposal),
                proposal.proposed_by.username, user.username, change.seq)
    return change


def proposal_write(proposal: TrustProposal, *, user) -> TrustChange:
    """What agents.trust.trust_confirm makes of a confirmed proposal that is not a mark of trust: the
    sealed change."""
    return (approval_write if proposal.kind == Kind.APPROVAL else change_write)(proposal, user=user)


def loosening_split(target: Tool | ToolSource, values: dict, *, trust_asked: bool = False) -> dict:
    """For the API's PATCH and the admin's form, inside their transaction: lock the target and take the
    loosening out of `values` (approval_loosening). The caller writes the rest, then proposes the loosening
    (approval_propose), so that the proposal is made against the approval as the rest left it.
    `trust_asked`: the same request proposes a mark of trust; one request makes one proposal (409)."""
    locked = type(target).objects.select_for_update().get(pk=target.pk)
    change = approval_loosening(locked, values)
    if change and trust_asked:
        raise OneProposalAtATime(f"this request would propose both marking {target.name} trusted and loosening its "
                                 "approval: propose one at a time", details={"name": target.name})
    return change
