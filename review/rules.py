"""The only writer of sampling rules: a change that would look at fewer runs takes two people.

The rules decide which sealed runs a compliance reviewer must look at (review.sampling), so one
compliance member who could delete the rule, disable it, lower its percentage, drop a trigger or a
tool, or narrow it from every agent to one (or move it to another agent) would loosen the oversight
of runs alone. Such a change by a person is a SamplingRuleProposal: the rule stays as it was and
keeps sampling, until a different compliance member or governance admin approves it
(core.four_eyes.check_second_admin: not the proposer, not an account the proposer set up); the
approved proposal names both. Another may refuse it, the proposer may withdraw it; one made against
an older state of the rule (its updated_at) is stale (409), and one older than
WARRANT["SECOND_ADMIN_WINDOW_HOURS"] can no longer be approved (409 request_expired).

What only tightens applies at once: a new rule, a higher percentage, a trigger or tool added,
enabling, widening to every agent, a new name or note. A change that both tightens and loosens is a
proposal as a whole. Each field is judged on its own, whether or not the rule is enabled. The
platform (no user) is not a person and changes rules in one step.
"""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from agents.models import Agent
from core import proposals
from core.api_errors import Conflict, DomainError
from core.four_eyes import check_second_admin
from core.proposals import NotPending, ProposalStale, person  # noqa: F401 (their codes are this API's too)
from review.models import SamplingRule, SamplingRuleProposal
from review.views import may_see_dashboard

K = SamplingRuleProposal.Kind
FIELDS = ("name", "agent", "percentage", "always", "tools", "enabled", "note")
CONFIRMER = "compliance member or governance admin"


def _json(field: str, value):
    if field == "agent":
        return value.slug if value is not None else None
    if field == "percentage":
        return str(Decimal(str(value)).quantize(Decimal("0.01")))
    return value


def changed_fields(rule: SamplingRule, values: dict) -> dict:
    """The fields of `values` (validated: field -> value) that differ from the rule's, as JSON."""
    return {f: _json(f, v) for f, v in values.items() if f in FIELDS and _json(f, getattr(rule, f)) != _json(f, v)}


def loosenings(rule: SamplingRule, changes: dict) -> list[str]:
    """What `changes` (as changed_fields gives them) would sample less than `rule` does; [] when nothing."""
    found = []
    if "enabled" in changes and rule.enabled and not changes["enabled"]:
        found.append("disables the rule")
    if "percentage" in changes and Decimal(changes["percentage"]) < rule.percentage:
        found.append(f"lowers the percentage from {_json('percentage', rule.percentage)} to {changes['percentage']}")
    for field, what in (("always", "trigger"), ("tools", "tool")):
        dropped = sorted(set(getattr(rule, field)) - set(changes.get(field, getattr(rule, field))))
        if dropped:
            found.append(f"drops the {what}(s) {', '.join(dropped)}")
    if "agent" in changes and changes["agent"] is not None:
        found.append(f"narrows it from {rule.agent.slug if rule.agent else 'every agent'} to {changes['agent']}")
    return found


def _save(rule: SamplingRule) -> SamplingRule:
    try:
        rule.full_clean(validate_unique=False)
    except ValidationError as exc:
        raise DomainError("the change does not fit the rule", details=exc.message_dict) from None
    try:
        with transaction.atomic():
            rule.save()
    except IntegrityError:
        raise Conflict("a sampling rule of that name exists") from None
    return rule


def _apply(rule: SamplingRule, kind: str, changes: dict) -> SamplingRule | None:
    if kind == K.DELETE:
        rule.delete()
        return None
    for field, value in changes.items():
        if field == "agent":
            value = Agent.objects.get(slug=value) if value is not None else None
        elif field == "percentage":
            value = Decimal(value)
        setattr(rule, field, value)
    return _save(rule)


def rule_add(rule: SamplingRule) -> SamplingRule:
    """A new rule can only sample more: made at once (the workbench hands its unsaved form's rule)."""
    return _save(rule)


def rule_create(values: dict, *, user) -> SamplingRule:
    return rule_add(SamplingRule(**{f: v for f, v in values.items() if f in FIELDS}, created_by=person(user)))


def _propose(rule: SamplingRule, kind: str, *, user, changes: dict, loosens: list[str]) -> SamplingRuleProposal:
    return SamplingRuleProposal.objects.create(rule=rule, rule_name=rule.name, kind=kind,
                                               base_updated_at=rule.updated_at, changes=changes, loosens=loosens,
                                               proposed_by=user)


def rule_update(rule: SamplingRule, values: dict, *, user) -> SamplingRule | SamplingRuleProposal:
    """Apply `values` to the rule, or, when they would loosen it and a person asks, propose them.

    Judged against the row locked here, not the one the caller read: a tightening read from an old
    state must not land as a loosening of a newer one."""
    with transaction.atomic():
        locked = SamplingRule.objects.select_for_update().get(pk=rule.pk)
        changes = changed_fields(locked, values)
        loosens = loosenings(locked, changes)
        if loosens and person(user) is not None:
            return _propose(locked, K.UPDATE, user=user, changes=changes, loosens=loosens)
        return _apply(locked, K.UPDATE, changes)


def rule_delete(rule: SamplingRule, *, user) -> SamplingRuleProposal | None:
    """A person's deletion is always a proposal; the platform's is made at once (None)."""
    with transaction.atomic():
        locked = SamplingRule.objects.select_for_update().get(pk=rule.pk)
        if person(user) is None:
            return _apply(locked, K.DELETE, {})
        return _propose(locked, K.DELETE, user=user, changes={}, loosens=["deletes the rule"])


def _what(proposal: SamplingRuleProposal) -> str:
    return f"the {proposal.kind} of sampling rule {proposal.rule_name}"


def _check_second(user, proposal: SamplingRuleProposal, what: str, details: dict) -> None:
    check_second_admin(user, what=what, parties=[(proposal.proposed_by, "proposed it")], details=details,
                       may_confirm=may_see_dashboard, confirmer=CONFIRMER)


def _apply_proposed(proposal: SamplingRuleProposal, details: dict) -> None:
    rule = SamplingRule.objects.select_for_update().filter(pk=proposal.rule_id).first()
    if rule is None or rule.updated_at != proposal.base_updated_at:
        raise ProposalStale(f"{_what(proposal)} was proposed against the rule as it was at "
                            f"{proposal.base_updated_at.isoformat()}, and it has changed since (or is gone); "
                            "propose it again", details=details)
    if _apply(rule, proposal.kind, proposal.changes) is None:
        proposal.rule = None


def approve(proposal: SamplingRuleProposal, *, user) -> SamplingRuleProposal:
    """A second person applies the proposal: the rule as it stood when proposed, or 409."""
    return proposals.approve(proposal, user=user, what=_what(proposal), check_second=_check_second,
                             apply=_apply_proposed)


def refuse(proposal: SamplingRuleProposal, *, user) -> SamplingRuleProposal:
    """Another person turns the proposal down (its proposer withdraws it instead)."""
    return proposals.refuse(proposal, user=user, what=_what(proposal), check_second=_check_second)


def withdraw(proposal: SamplingRuleProposal, *, user) -> SamplingRuleProposal:
    return proposals.withdraw(proposal, user=user, refuser=CONFIRMER)
