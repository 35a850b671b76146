"""Maker-checker for golden cases: a person's change that could loosen the gate is a proposal.

The golden set is what every policy and skill change is gated on (evals.gating), so one governance
admin who could edit the case a weakened policy would fail, and then activate that policy through
the gate it no longer fails, would need no one else. An edit, a deletion or a recording of a case by
a person is therefore a GoldenCaseProposal: the case stays as it was, the gate runs it as it was,
until a different governance admin approves (core.four_eyes.check_second_admin: the proposer gets
403 second_admin_required and nothing is written). The version written then names both: changed_by
the approver, proposed_by the proposer. Another admin may refuse it, the proposer may withdraw it; a
proposal made against an older version of the case than the one in force is stale (409), and one
older than WARRANT["SECOND_ADMIN_WINDOW_HOURS"] can no longer be approved (409 request_expired).

A new case applies at once: the gate needs every enabled case to pass (GATE_THRESHOLD 1.0), so one
more case can only make it refuse more, never let through what it refused. The platform (no user:
load_demo) is not a person and changes cases in one step.
"""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent
from core.api_errors import Conflict, DomainError, Forbidden
from core.four_eyes import check_fresh, check_second_admin
from evals.cases import _person, case_changed, case_delete, case_values, keep_recording, recording_of
from evals.models import GoldenCase, GoldenCaseProposal

K, S = GoldenCaseProposal.Kind, GoldenCaseProposal.Status


class ProposalStale(Conflict):
    code = "proposal_stale"


class NotPending(Conflict):
    code = "proposal_decided"


def _json(field: str, value):
    return value.slug if field == "agent" else value


def changed_fields(case: GoldenCase, values: dict) -> dict:
    """The fields of `values` (a validated change: field -> value) that differ from the case's, as JSON."""
    return {f: _json(f, v) for f, v in values.items() if _json(f, getattr(case, f)) != _json(f, v)}


def _apply(case: GoldenCase, kind: str, changes: dict, *, user, proposed_by=None, note: str = "") -> GoldenCase | None:
    """Make the change: an update (full_clean again: a role may have gone since), a deletion, or a recording."""
    if kind == K.DELETE:
        case_delete(case, user=user, proposed_by=proposed_by, note=note)
        return None
    if kind == K.RECORD:
        return keep_recording(case, changes["recordings"], version=case.version, user=user, via=note,
                              proposed_by=proposed_by, recorded_by=proposed_by or user)
    before = case_values(case)
    for field, value in changes.items():
        setattr(case, field, Agent.objects.get(slug=value) if field == "agent" else value)
    try:
        case.full_clean()
    except ValidationError as exc:
        raise DomainError("the change no longer fits the case", details=exc.message_dict) from None
    try:
        with transaction.atomic():
            case.save()
            case_changed(case, before, user=user, proposed_by=proposed_by)
    except IntegrityError:
        raise Conflict("the agent already has a golden case of that name") from None
    return case


def propose(case: GoldenCase, kind: str, *, user, changes: dict | None = None, note: str = ""):
    """A person's change of `case`: a pending proposal that changes nothing. The platform's (no user)
    is made at once; the case (None once deleted) is returned then."""
    changes = changes or {}
    if _person(user) is None:
        return _apply(case, kind, changes, user=None, note=note)
    return GoldenCaseProposal.objects.create(
        case=case, agent_slug=case.agent.slug, case_name=case.name, kind=kind, base_version=case.version,
        changes=changes, note=note[:300], proposed_by=user)


def propose_record(case: GoldenCase, *, user, via: str = ""):
    """Record `case` against the live data now (RecordingRefused if it may not be kept) and propose
    the recordings: they are the case's only once a second admin approves them."""
    return propose(case, K.RECORD, user=user, changes={"recordings": recording_of(case)}, note=via)


def _locked(proposal: GoldenCaseProposal) -> GoldenCaseProposal:
    locked = GoldenCaseProposal.objects.select_for_update().get(pk=proposal.pk)
    if locked.status != S.PENDING:
        raise NotPending(f"proposal {locked.pk} was {locked.status} already", details={"proposal": locked.pk})
    return locked


def _what(proposal: GoldenCaseProposal) -> str:
    return f"the {proposal.kind} of golden case {proposal.agent_slug}/{proposal.case_name}"


def _decided(proposal: GoldenCaseProposal, status: str, user) -> GoldenCaseProposal:
    proposal.status, proposal.decided_by, proposal.decided_at = status, user, timezone.now()
    proposal.save(update_fields=["status", "decided_by", "decided_at"])
    return proposal


def approve(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    """A second governance admin applies the proposal; its version names both."""
    details = {"proposal": proposal.pk}
    with transaction.atomic():
        locked = _locked(proposal)
        check_second_admin(user, what=_what(locked), parties=[(locked.proposed_by, "proposed it")], details=details)
        check_fresh(locked.created_at, what=_what(locked), details=details)
        case = GoldenCase.objects.select_for_update().select_related("agent").filter(pk=locked.case_id).first()
        if case is None or case.version != locked.base_version:
            raise ProposalStale(f"{_what(locked)} was proposed against version {locked.base_version}, and the case "
                                "has changed since (or is gone); propose it again", details=details)
        _apply(case, locked.kind, locked.changes, user=user, proposed_by=locked.proposed_by, note=locked.note)
        return _decided(locked, S.APPROVED, user)


def refuse(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    """Another governance admin turns the proposal down (its proposer withdraws it instead)."""
    with transaction.atomic():
        locked = _locked(proposal)
        check_second_admin(user, what=f"refusing {_what(locked)}", parties=[(locked.proposed_by, "proposed it")],
                           details={"proposal": locked.pk, "hint": "the proposer withdraws it"})
        return _decided(locked, S.REFUSED, user)


def withdraw(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    with transaction.atomic():
        locked = _locked(proposal)
        if locked.proposed_by_id != getattr(user, "pk", None):
            raise Forbidden("only its proposer may withdraw a proposal; another governance admin refuses it",
                            details={"proposal": locked.pk})
        return _decided(locked, S.WITHDRAWN, user)
