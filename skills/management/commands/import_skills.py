"""Import SKILL.md files into the database: `manage.py import_skills [PATH ...]`."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from skills.parser import SkillFormatError
from skills.services import skill_import_report

DEFAULT_LIBRARY = Path(__file__).resolve().parents[2] / "library"


class Command(BaseCommand):
    help = (
        "Import every SKILL.md under the given directories (or the given SKILL.md files); "
        "defaults to the bundled skills/library. Re-importing unchanged text changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", metavar="PATH", help="a directory to search, or a SKILL.md file")

    def handle(self, *args, paths, **options):
        files = _collect([Path(p) for p in paths] or [DEFAULT_LIBRARY])
        if not files:
            raise CommandError(f"no SKILL.md files found under: {', '.join(paths) or str(DEFAULT_LIBRARY)}")

        # Skills are independent: a broken file is skipped and reported, the others still import,
        # and the exit status says that something needs fixing.
        failures: list[str] = []
        for path in files:
            try:
                skill, outcome = skill_import_report(text=_read(path))
            except SkillFormatError as exc:
                failures.append(str(exc.at(file=str(path))) + (f" [field: {exc.field}]" if exc.field else ""))
                continue
            self.stdout.write(f"{outcome:<9} {skill.name} v{skill.version} ({path})")

        if failures:
            raise CommandError(
                f"{len(failures)} SKILL.md file(s) not imported:\n" + "\n".join(f"  {line}" for line in failures)
            )


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
