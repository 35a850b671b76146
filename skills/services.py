"""Writes for skills: import a SKILL.md into a row, export a row back to its SKILL.md."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from skills.models import Skill, SkillVersion
from skills.parser import ParsedSkill, SkillFormatError, parse_skill_md

CREATED = "created"
UPDATED = "updated"
UNCHANGED = "unchanged"


def skill_import(*, text: str, user=None, status: str | None = None) -> tuple[Skill, bool]:
    """Create or update the skill named in text; returns (skill, created).

    Idempotent: the same text again changes nothing. Changed text bumps the version by one
    (or to the front matter's version, if that is higher). Invalid text raises
    SkillFormatError and writes nothing.
    """
    skill, outcome = skill_import_report(text=text, user=user, status=status)
    return skill, outcome == CREATED


def skill_import_report(*, text: str, user=None, status: str | None = None) -> tuple[Skill, str]:
    """Like skill_import, but says what happened: "created", "updated" or "unchanged"."""
    parsed = parse_skill_md(text)
    if status is not None and status not in Skill.Status.values:
        raise SkillFormatError(f"unknown skill status {status!r}; expected one of {', '.join(Skill.Status.values)}")
    try:
        return _import(parsed=parsed, text=text, user=user, status=status)
    except IntegrityError:
        # Another importer created the same name between our read and our insert; the row
        # exists now, so the second attempt takes the update path under the row lock.
        return _import(parsed=parsed, text=text, user=user, status=status)


def skill_export(*, skill: Skill) -> str:
    """The SKILL.md text the skill was imported from, byte for byte."""
    return skill.source


def _import(*, parsed: ParsedSkill, text: str, user, status: str | None) -> tuple[Skill, str]:
    with transaction.atomic():
        skill = Skill.objects.select_for_update().filter(name=parsed.name).first()
        if skill is None:
            skill = Skill(name=parsed.name, version=parsed.version or 1)
            if status is not None:
                skill.status = status
            _apply(skill, parsed=parsed, text=text, user=user)
            skill.save()
            _history(skill, user)
            return skill, CREATED

        text_changed = skill.sha256 != parsed.sha256
        status_changed = status is not None and status != skill.status
        if not text_changed and not status_changed:
            return skill, UNCHANGED
        if text_changed:
            skill.version = max(skill.version + 1, parsed.version or 0)
            _apply(skill, parsed=parsed, text=text, user=user)
        if status_changed:
            skill.status = status
            skill.updated_by = user
        skill.save()
        _history(skill, user)
        return skill, UPDATED


def _apply(skill: Skill, *, parsed: ParsedSkill, text: str, user) -> None:
    skill.description = parsed.description
    skill.tags = list(parsed.tags)
    skill.allowed_tools = list(parsed.allowed_tools)
    skill.body = parsed.body
    skill.sha256 = parsed.sha256
    skill.source = text
    skill.updated_by = user


def _history(skill: Skill, user) -> None:
    SkillVersion.objects.create(skill=skill, skill_name=skill.name, version=skill.version, status=skill.status,
                                source=skill.source, sha256=skill.sha256, changed_by=user)
