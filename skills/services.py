"""Writes for skills: import a SKILL.md into a row, export it back, move it through its lifecycle.

Lifecycle: draft -> approved (by a governance admin who is not its author) -> active (reaches
runs) -> retired. New text is a new version and starts again as a draft: what runs use is
always what someone other than its author reviewed. A person's activation, and a person's change
that takes the active version out of force (retiring it, a draft again, new text), go through the
golden gate (skills.gate). `user=None` is the platform itself (the
bundled demo library, loaded by a management command), trusted like the code it ships with; run
on a person's command (load_demo), it passes the golden sets' gate first (`gated`).
"""

from __future__ import annotations

from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.api_errors import Conflict, Forbidden
from core.permissions import is_governance_admin
from skills.gate import (ACTIVATE, EmergencyPending, NoEmergencyRequest, SkillGateFailed, gate_failed,  # noqa: F401
                         platform_removal, register_activation_gate, removal_action, run_gate, through_gate)
from skills.models import Skill, SkillVersion
from skills.parser import ParsedSkill, SkillFormatError, parse_skill_md

CREATED = "created"
UPDATED = "updated"
UNCHANGED = "unchanged"
HELD = "held"  # a gated platform import the golden set refused: what was in force stays
EMERGENCY_ASKED = "emergency_asked"  # a failing gate and a stated reason: a second admin confirms it

S = Skill.Status
TRANSITIONS = {
    S.DRAFT: {S.APPROVED, S.RETIRED},
    S.APPROVED: {S.ACTIVE, S.DRAFT, S.RETIRED},
    S.ACTIVE: {S.RETIRED, S.DRAFT},
    S.RETIRED: {S.DRAFT},
}


class SkillLifecycleError(Conflict):
    code = "invalid_transition"


class SkillChanged(Conflict):
    code = "skill_changed"


def _run_gate(*, parsed: ParsedSkill, text: str, user):
    """The gate's verdict for a skill about to become active (None when no gate is registered)."""
    candidate = Skill(name=parsed.name, status=S.ACTIVE)
    _apply(candidate, parsed=parsed, text=text, user=user)
    current = Skill.objects.filter(name=parsed.name).values_list("version", flat=True).first()
    candidate.version = current or parsed.version or 1
    return run_gate(spec=candidate.spec(), user=user)


def _gate_activation(*, parsed: ParsedSkill, text: str, user) -> tuple[str | None, str]:
    """(the eval run id, "") when the golden set passes with the skill active; SkillGateFailed otherwise."""
    verdict = _run_gate(parsed=parsed, text=text, user=user)
    if verdict is not None and verdict.passed:
        return verdict.eval_run_id, ""
    raise gate_failed(parsed.name, verdict)


def _removes(existing: Skill, parsed: ParsedSkill, status: str | None) -> bool:
    """Whether the change takes the active version out of force: another status, or new text (a draft)."""
    return existing.status == S.ACTIVE and (existing.sha256 != parsed.sha256 or status not in (None, S.ACTIVE))


def _removal(existing: Skill, parsed: ParsedSkill, status: str | None, user) -> str:
    """The removal's action (see skills.gate.removal_action), once the lifecycle allows the change: a
    refused transition runs no gate."""
    if existing.sha256 == parsed.sha256:
        check_skill_transition(skill=existing, to=status, user=user)
        return removal_action(to=status, new_sha256=None)
    to = status or S.DRAFT  # new text is a draft by its author, from which `status` must be reachable
    check_skill_transition(skill=Skill(name=existing.name, status=S.DRAFT, author=user), to=to, user=user)
    return removal_action(to=to, new_sha256=parsed.sha256)


def check_skill_transition(*, skill: Skill, to: str, user) -> None:
    """Refuse a status change the lifecycle does not allow, or an approval by the wrong person."""
    if to == skill.status or user is None:
        return
    if to not in TRANSITIONS[skill.status]:
        allowed = ", ".join(sorted(TRANSITIONS[skill.status]))
        raise SkillLifecycleError(f"a {skill.status} skill cannot become {to}; it may become: {allowed}",
                                  details={"status": skill.status, "to": to})
    if to == S.APPROVED:
        if not is_governance_admin(user):
            raise Forbidden("only a governance admin may approve a skill")
        if skill.author_id is not None and skill.author_id == user.pk:
            raise Forbidden("a skill's author may not approve it; another governance admin must review it")


def skill_import(*, text: str, user=None, status: str | None = None) -> tuple[Skill, bool]:
    """Create or update the skill named in text; returns (skill, created).

    Idempotent: the same text again changes nothing. Changed text bumps the version by one
    (or to the front matter's version, if that is higher) and returns the skill to draft.
    Invalid text raises SkillFormatError and writes nothing.
    """
    skill, outcome = skill_import_report(text=text, user=user, status=status)
    return skill, outcome == CREATED


def skill_import_report(*, text: str, user=None, status: str | None = None, emergency_reason: str = "",
                        confirm_emergency: bool = False, gated: bool = False) -> tuple[Skill, str]:
    """Like skill_import, but says what happened: "created", "updated", "unchanged", "held" or
    "emergency_asked".

    A person's activation passes the gate first: the golden sets with the skill active (see
    _gate_activation); so does a person's change that takes the active version out of force (another
    status, or new text, which is a draft): the golden sets without it. Past a failing set only by two
    governance admins: one states `emergency_reason` (the request is recorded, bound to the text and the
    change, and nothing changes in force: "emergency_asked"), another confirms the same change
    (`confirm_emergency`); the history row records both (skills.gate).
    `gated`: the platform's import on a person's command (load_demo) passes it too, for anything it
    would put in force (a new skill, new text, a skill a person took out of force); refused, it is
    "held": an existing skill is left as it is, a new one is made a draft for people to review."""
    parsed = parse_skill_md(text)
    if status is not None and status not in Skill.Status.values:
        raise SkillFormatError(f"unknown skill status {status!r}; expected one of {', '.join(Skill.Status.values)}",
                               field="status")
    gate, asked_by, bound, removes = (None, ""), None, None, None
    existing = Skill.objects.filter(name=parsed.name).select_related("emergency_requested_by", "author").first()
    person = user is not None and existing is not None
    activates = person and status == S.ACTIVE and existing.status != S.ACTIVE and existing.sha256 == parsed.sha256
    if activates or (person and _removes(existing, parsed, status)):
        if activates:
            check_skill_transition(skill=existing, to=S.ACTIVE, user=user)  # a refused transition runs no gate
            action, bound = ACTIVATE, (parsed.sha256, ACTIVATE)
        else:
            action = _removal(existing, parsed, status, user)
            bound, removes = (existing.sha256, action), existing.sha256

        def verdict_of():
            if activates:
                return _run_gate(parsed=parsed, text=text, user=user)
            # Taking the active version out of force lifts its contract: the golden set runs without it.
            return run_gate(spec=existing.spec(), user=user, removal=True)

        passed = through_gate(skill=existing, user=user, action=action, verdict_of=verdict_of,
                              failed=lambda verdict: gate_failed(parsed.name, verdict, removal=not activates),
                              emergency_reason=emergency_reason, confirm_emergency=confirm_emergency)
        if passed is None:
            return Skill.objects.get(pk=existing.pk), EMERGENCY_ASKED
        gate, asked_by = passed
    elif gated and user is None and status == S.ACTIVE and (
            existing is None or existing.sha256 != parsed.sha256 or existing.status != S.ACTIVE):
        try:
            gate = _gate_activation(parsed=parsed, text=text, user=None)
        except SkillGateFailed:
            if existing is not None:
                return existing, HELD
            return _import(parsed=parsed, text=text, user=None, status=S.DRAFT)[0], HELD
    return _written(parsed=parsed, text=text, user=user, status=status, gate=gate, asked_by=asked_by, bound=bound,
                    removes=removes)


def _written(**import_args) -> tuple[Skill, str]:
    try:
        return _import(**import_args)
    except IntegrityError:
        # Another importer created the same name between our read and our insert; the row
        # exists now, so the second attempt takes the update path under the row lock.
        return _import(**import_args)


def skill_import_by_platform(*, text: str, emergency_reason: str = "", via: str) -> tuple[Skill, str, str]:
    """The platform's import of a file (manage.py import_skills): (the skill, what happened, the
    emergency mark or ""). It puts nothing in force; new text for an active skill takes the version in
    force out of force, so it passes the removal gate first (skills.gate.platform_removal: past a failing
    set only with `emergency_reason`, marked with it and `via`). Refused, SkillGateFailed, nothing written."""
    parsed = parse_skill_md(text)
    existing = Skill.objects.filter(name=parsed.name).first()
    if existing is None or existing.status != S.ACTIVE or existing.sha256 == parsed.sha256:
        # Nothing in force to take out (or the same text): refused under the row's lock if a person
        # activated the skill since this read, as the new text would then take it out ungated.
        return (*_written(parsed=parsed, text=text, user=None, status=None, none_in_force=True), "")
    gate = platform_removal(skill=existing, reason=emergency_reason, via=via)
    # Under the row's lock, a refusal if the version the gate ran without is no longer the one in force.
    skill, outcome = _import(parsed=parsed, text=text, user=None, status=None, gate=gate, removes=existing.sha256)
    return skill, outcome, gate[1]


def skill_export(*, skill: Skill) -> str:
    """The SKILL.md text the skill was imported from, byte for byte."""
    return skill.source


def skills_export_folder(*, root: Path, skills=None) -> list[Path]:
    """Write each skill as <root>/<name>/SKILL.md; importing the folder again changes nothing."""
    written = []
    for skill in skills if skills is not None else Skill.objects.all():
        path = root / skill.name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(skill.source.encode("utf-8"))
        written.append(path)
    return written


def _set_status(skill: Skill, to: str, user) -> None:
    check_skill_transition(skill=skill, to=to, user=user)
    if to == S.APPROVED:
        skill.approved_by, skill.approved_at = user, timezone.now()
    elif to == S.DRAFT:
        skill.approved_by, skill.approved_at = None, None
    skill.status = to
    skill.updated_by = user


def _import(*, parsed: ParsedSkill, text: str, user, status: str | None, gate=(None, ""),
            asked_by=None, bound: tuple[str, str] | None = None, removes: str | None = None,
            none_in_force: bool = False) -> tuple[Skill, str]:
    """Write the import under the skill's row lock. `removes`: the version in force the caller's
    removal gate ran without; `none_in_force`: the caller found no version in force and ran no removal
    gate. Either is checked again under the lock, and a skill that changed since is SkillChanged."""
    with transaction.atomic():
        skill = Skill.objects.select_for_update().filter(name=parsed.name).first()
        if skill is None:
            skill = Skill(name=parsed.name, version=parsed.version or 1, status=S.DRAFT)
            _apply(skill, parsed=parsed, text=text, user=user)
            if status is not None and status != S.DRAFT:
                if user is not None:
                    raise SkillLifecycleError("a new skill starts as a draft; another governance admin approves it",
                                              details={"status": status})
                skill.status = status
            skill.save()
            _history(skill, user)
            return skill, CREATED

        if asked_by is not None and (skill.emergency_requested_by_id != asked_by.pk or (
                skill.emergency_request_sha256, skill.emergency_request_action) != bound):
            # Checked again under the row's lock: the request confirmed is the one still standing.
            raise NoEmergencyRequest(f"the emergency request for skill {skill.name!r} changed while it was "
                                     f"confirmed; confirm it again", details={"skill": skill.name})
        if removes is not None and (skill.status, skill.sha256) != (S.ACTIVE, removes):
            # The gate ran on the world without the version in force; another change came first.
            raise SkillChanged(f"skill {skill.name!r} changed while its gate ran; try again",
                               details={"skill": skill.name, "status": skill.status})
        text_changed = skill.sha256 != parsed.sha256
        if none_in_force and text_changed and skill.status == S.ACTIVE:
            # A version went into force after the caller looked: new text would take it out ungated.
            raise SkillChanged(f"skill {skill.name!r} was activated while it was imported; try again",
                               details={"skill": skill.name, "status": skill.status})
        if text_changed:
            skill.version = max(skill.version + 1, parsed.version or 0)
            _apply(skill, parsed=parsed, text=text, user=user)
            if asked_by is not None:  # a confirmed emergency's text is the asker's: the confirmer only agreed
                skill.author = asked_by
            # New text has not been reviewed: it goes back to draft, unless the platform loads it.
            skill.status = status if (user is None and status is not None) else S.DRAFT
            skill.approved_by, skill.approved_at = None, None
            if user is not None and status is not None and status != S.DRAFT:
                _set_status(skill, status, user)
        elif status is not None and status != skill.status:
            _set_status(skill, status, user)
        else:
            return skill, UNCHANGED
        if skill.status == S.ACTIVE and user is not None:
            # Set by this activation's gate: an emergency marks the version, a passing gate clears the mark.
            skill.emergency_reason = gate[1]
        if skill.status == S.ACTIVE or text_changed or removes is not None:
            # A request is spent by the activation or removal it was for, and void for new text.
            skill.emergency_request_reason, skill.emergency_request_sha256, skill.emergency_request_action = "", "", ""
            skill.emergency_requested_by, skill.emergency_requested_at = None, None
        skill.save()
        # An activation's or a removal's gate, and both names past a failing one, on the history row.
        _history(skill, user, gate=gate, asked_by=asked_by)
        return skill, UPDATED


def _apply(skill: Skill, *, parsed: ParsedSkill, text: str, user) -> None:
    skill.description = parsed.description
    skill.tags = list(parsed.tags)
    skill.allowed_tools = list(parsed.allowed_tools)
    skill.inputs = parsed.inputs
    skill.outputs = parsed.outputs
    skill.side_effects = list(parsed.side_effects)
    skill.body = parsed.body
    skill.sha256 = parsed.sha256
    skill.source = text
    skill.updated_by = user
    skill.author = user


def _history(skill: Skill, user, gate=(None, ""), asked_by=None) -> None:
    SkillVersion.objects.create(skill=skill, skill_name=skill.name, version=skill.version, status=skill.status,
                                source=skill.source, sha256=skill.sha256, changed_by=user,
                                eval_run_id=gate[0], emergency_reason=gate[1], emergency_requested_by=asked_by)
