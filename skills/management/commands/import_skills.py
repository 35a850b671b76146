"""Import SKILL.md files into the database: `manage.py import_skills [PATH ...]`.

The command is the platform (no user) and puts nothing in force: a new skill is a draft, new text
sends a skill back to draft, and activating it is then a person's, gated. New text for an active
skill takes the version in force out of force at once (one row per skill), which lifts its contract:
so it passes the golden sets' removal gate first, as a person's change does (skills.gate). A failing
set leaves that skill exactly as it was and fails the command, naming the cases it broke; the other
files still import. `--emergency-reason` takes it past a failing set in one step, the platform's
emergency (as governance.drafts.draft_activate_emergency is for a policy): the history row of the
new version carries the gate's eval run and the mark, the reason then "(manage.py import_skills, OS
user ...)", since a shell may be anyone's.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.api_errors import Conflict
from core.shell import os_user
from skills.gate import MIN_REASON_CHARS, SkillGateFailed
from skills.models import Skill
from skills.parser import SkillFormatError, parse_skill_md
from skills.services import skill_import_by_platform

DEFAULT_LIBRARY = Path(__file__).resolve().parents[2] / "library"


class Command(BaseCommand):
    help = (
        "Import every SKILL.md under the given directories (or the given SKILL.md files); "
        "defaults to the bundled skills/library. Re-importing unchanged text changes nothing. New text for an "
        "active skill passes the golden sets without it first (--emergency-reason: past a failing set)."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", metavar="PATH", help="a directory to search, or a SKILL.md file")
        parser.add_argument(
            "--emergency-reason", default="", metavar="REASON",
            help=f"why new text may take an active skill out of force though the golden set fails without it "
                 f"(at least {MIN_REASON_CHARS} characters); the new version's history row is marked with it")

    def handle(self, *args, paths, emergency_reason, **options):
        reason = emergency_reason.strip()
        if reason and len(reason) < MIN_REASON_CHARS:
            raise CommandError(f"--emergency-reason must state why, in at least {MIN_REASON_CHARS} characters")
        files = _collect([Path(p) for p in paths] or [DEFAULT_LIBRARY])
        if not files:
            raise CommandError(f"no SKILL.md files found under: {', '.join(paths) or str(DEFAULT_LIBRARY)}")

        # Skills are independent: a broken file, or one the gate refuses, is skipped and reported, the
        # others still import, and the exit status says that something needs fixing.
        failures: list[str] = []
        for path in files:
            try:
                skill, outcome, mark = _import_one(_read(path), reason=reason)
            except SkillFormatError as exc:
                failures.append(str(exc.at(file=str(path))) + (f" [field: {exc.field}]" if exc.field else ""))
                continue
            except Conflict as exc:  # the gate refused it (GateRefused), or the skill changed while it ran
                failures.append(f"{path}: {exc.message}")
                continue
            self.stdout.write(f"{outcome:<9} {skill.name} v{skill.version} ({path})")
            if mark:
                self.stdout.write(self.style.WARNING(
                    f"          the golden set fails without the version that was active; taken out of force by "
                    f"--emergency-reason, marked on its history: {mark}"))

        if failures:
            raise CommandError(
                f"{len(failures)} SKILL.md file(s) not imported:\n" + "\n".join(f"  {line}" for line in failures)
            )


def _import_one(text: str, *, reason: str) -> tuple[Skill, str, str]:
    """(the skill, what happened, the emergency mark or ""); a Conflict naming the cases the removal
    gate found broken when it refuses, and nothing is written."""
    try:
        return skill_import_by_platform(text=text, emergency_reason=reason,
                                        via=f"manage.py import_skills, OS user {os_user()}")
    except SkillGateFailed as exc:
        raise Conflict(_refusal(Skill.objects.get(name=parse_skill_md(text).name), exc)) from None


def _refusal(skill: Skill, exc: SkillGateFailed) -> str:
    report = exc.details.get("report") or {}
    if "error" in report:  # no gate: the platform fails closed
        why = report["error"]
    else:
        why = (f"the golden set does not pass without it, cases broken: {', '.join(report.get('broken') or [])} "
               f"(eval run {exc.details.get('eval_run')})")
    return (f"new text would take skill {skill.name!r} v{skill.version}, which is active, out of force, and {why}; "
            f"it stays active with its text. Keep the text, or give --emergency-reason to take it out of force "
            f"anyway")


def _collect(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            candidates = [path]
        elif path.is_dir():
            candidates = sorted(path.rglob("SKILL.md"))
        else:
            raise CommandError(f"no such file or directory: {path}")
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved not in {f.resolve() for f in found}:
                found.append(candidate)
    return found


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFormatError(f"SKILL.md must be valid UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise SkillFormatError(f"cannot read the file: {exc.strerror}") from None
