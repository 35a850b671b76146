"""Writes for skills: import a SKILL.md into a row, export it back, move it through its lifecycle.

Lifecycle: draft -> approved (by a governance admin who is not its author) -> active (reaches
runs) -> retired. New text is a new version and starts again as a draft: what runs use is
always what someone other than its author reviewed. `user=None` is the platform itself (the
bundled demo library, loaded by a management command), trusted like the code it ships with; run
on a person's command (load_demo), it passes the golden sets' gate first (`gated`).
"""

from __future__ import annotations

from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.api_errors import Conflict, Forbidden
from core.permissions import is_governance_admin
from skills.models import Skill, SkillVersion
from skills.parser import ParsedSkill, SkillFormatError, parse_skill_md

CREATED = "created"
UPDATED = "updated"
UNCHANGED = "unchanged"
HELD = "held"  # a gated platform import the golden set refused: what was in force stays

S = Skill.Status
TRANSITIONS = {
    S.DRAFT: {S.APPROVED, S.RETIRED},
    S.APPROVED: {S.ACTIVE, S.DRAFT, S.RETIRED},
    S.ACTIVE: {S.RETIRED, S.DRAFT},
    S.RETIRED: {S.DRAFT},
}


class SkillLifecycleError(Conflict):
    code = "invalid_transition"


class SkillGateFailed(Conflict):
    """The golden set does not pass with the skill active: the details carry the cases that changed."""

    code = "gate_failed"


# The activation gate: registered by evals when it loads (it runs the golden sets, above this app).
# gate(spec=, user=) -> a verdict with passed, eval_run_id and report. Without one, a person's
# activation is refused unless it states an emergency reason: the platform fails closed.
_activation_gate: list = []
MIN_REASON_CHARS = 10


def register_activation_gate(gate) -> None:
    _activation_gate[:] = [gate]


def _gate_activation(*, parsed: ParsedSkill, text: str, user, emergency_reason: str) -> tuple[str | None, str]:
    """Run the gate for a skill about to become active: (its eval run id, the emergency reason that
    lets a failing set past, or ""). Raises SkillGateFailed when the set fails and no reason is stated."""
    candidate = Skill(name=parsed.name, status=S.ACTIVE)
    _apply(candidate, parsed=parsed, text=text, user=user)
    current = Skill.objects.filter(name=parsed.name).values_list("version", flat=True).first()
    candidate.version = current or parsed.version or 1
    verdict = _activation_gate[0](spec=candidate.spec(), user=user) if _activation_gate else None
    if verdict is not None and verdict.passed:
        return verdict.eval_run_id, ""
    reason = (emergency_reason or "").strip()
    if len(reason) >= MIN_REASON_CHARS:
        return (verdict.eval_run_id if verdict else None), reason
    report = verdict.report if verdict else {"error": "no gate is registered (the evals app is not installed)"}
    raise SkillGateFailed(
        f"the golden set does not pass with skill {parsed.name!r} active; it is not activated. Fix the skill, or "
        f"activate it in an emergency with a stated reason (emergency_reason, at least {MIN_REASON_CHARS} characters).",
        details={"eval_run": verdict.eval_run_id if verdict else None, "report": report})


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


def skill_import_report(*, text: str, user=None, status: str | None = None,
                        emergency_reason: str = "", gated: bool = False) -> tuple[Skill, str]:
    """Like skill_import, but says what happened: "created", "updated", "unchanged" or "held".

    A person's activation passes the gate first: the golden sets with the skill active (see
    _gate_activation); `emergency_reason` lets a failing set past, recorded with the version.
    `gated`: the platform's import on a person's command (load_demo) passes it too, for anything it
    would put in force (a new skill, new text, a skill a person took out of force); refused, it is
    "held": an existing skill is left as it is, a new one is made a draft for people to review."""
    parsed = parse_skill_md(text)
    if status is not None and status not in Skill.Status.values:
        raise SkillFormatError(f"unknown skill status {status!r}; expected one of {', '.join(Skill.Status.values)}",
                               field="status")
    gate = (None, "")
    existing = Skill.objects.filter(name=parsed.name).first()
    if (user is not None and status == S.ACTIVE and existing is not None and existing.status != S.ACTIVE
            and existing.sha256 == parsed.sha256):
        check_skill_transition(skill=existing, to=S.ACTIVE, user=user)  # a refused transition runs no gate
        gate = _gate_activation(parsed=parsed, text=text, user=user, emergency_reason=emergency_reason)
    elif gated and user is None and status == S.ACTIVE and (
            existing is None or existing.sha256 != parsed.sha256 or existing.status != S.ACTIVE):
        try:
            gate = _gate_activation(parsed=parsed, text=text, user=None, emergency_reason="")
        except SkillGateFailed:
            if existing is not None:
                return existing, HELD
            return _import(parsed=parsed, text=text, user=None, status=S.DRAFT)[0], HELD
    try:
        return _import(parsed=parsed, text=text, user=user, status=status, gate=gate)
    except IntegrityError:
        # Another importer created the same name between our read and our insert; the row
        # exists now, so the second attempt takes the update path under the row lock.
        return _import(parsed=parsed, text=text, user=user, status=status, gate=gate)


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


def _import(*, parsed: ParsedSkill, text: str, user, status: str | None, gate=(None, "")) -> tuple[Skill, str]:
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

        text_changed = skill.sha256 != parsed.sha256
        if text_changed:
            skill.version = max(skill.version + 1, parsed.version or 0)
            _apply(skill, parsed=parsed, text=text, user=user)
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
        skill.save()
        _history(skill, user, gate=gate if skill.status == S.ACTIVE else (None, ""))
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


def _history(skill: Skill, user, gate=(None, "")) -> None:
    SkillVersion.objects.create(skill=skill, skill_name=skill.name, version=skill.version, status=skill.status,
                                source=skill.source, sha256=skill.sha256, changed_by=user,
                                eval_run_id=gate[0], emergency_reason=gate[1])
