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

from agents.models import Agent
from core import proposals
from core.api_errors import Conflict, DomainError
from core.four_eyes import check_second_admin
from core.proposals import NotPending, ProposalStale, person  # noqa: F401 (their codes are this API's too)
from evals.cases import case_changed, case_delete, case_values, keep_recording, recording_of
from evals.models import GoldenCase, GoldenCaseProposal

K = GoldenCaseProposal.Kind


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
    if person(user) is None:
        return _apply(case, kind, changes, user=None, note=note)
    return GoldenCaseProposal.objects.create(
        case=case, agent_slug=case.agent.slug, case_name=case.name, kind=kind, base_version=case.version,
        changes=changes, note=note[:300], proposed_by=user)


def propose_record(case: GoldenCase, *, user, via: str = ""):
    """Record `case` against the live data now (RecordingRefused if it may not be kept) and propose
    the recordings: they are the case's only once a second admin approves them."""
    return propose(case, K.RECORD, user=user, changes={"recordings": recording_of(case)}, note=via)


def _what(proposal: GoldenCaseProposal) -> str:
    return f"the {proposal.kind} of golden case {proposal.agent_slug}/{proposal.case_name}"


def _check_second(user, proposal: GoldenCaseProposal, what: str, details: dict) -> None:
    check_second_admin(user, what=what, parties=[(proposal.proposed_by, "proposed it")], details=details)


def _apply_proposed(proposal: GoldenCaseProposal, details: dict, *, user) -> None:
    case = GoldenCase.objects.select_for_update().select_related("agent").filter(pk=proposal.case_id).first()
    if case is None or case.version != proposal.base_version:
        raise ProposalStale(f"{_what(proposal)} was proposed against version {proposal.base_version}, and the case "
                            "has changed since (or is gone); propose it again", details=details)
    _apply(case, proposal.kind, proposal.changes, user=user, proposed_by=proposal.proposed_by, note=proposal.note)


def approve(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    """A second governance admin applies the proposal; its version names both."""
    return proposals.approve(proposal, user=user, what=_what(proposal), check_second=_check_second,
                             apply=lambda locked, details: _apply_proposed(locked, details, user=user))


def refuse(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    """Another governance admin turns the proposal down (its proposer withdraws it instead)."""
    return proposals.refuse(proposal, user=user, what=_what(proposal), check_second=_check_second)


def withdraw(proposal: GoldenCaseProposal, *, user) -> GoldenCaseProposal:
    return proposals.withdraw(proposal, user=user, refuser="governance admin")
