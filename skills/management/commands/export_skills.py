"""Export skills as a folder of SKILL.md files: `manage.py export_skills DIR [NAME ...]`.

Each skill is written byte for byte as DIR/<name>/SKILL.md, so `import_skills DIR` afterwards
changes nothing: the round trip is exact.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from skills.models import Skill
from skills.services import skills_export_folder


class Command(BaseCommand):
    help = "Write every skill (or the named ones) as DIR/<name>/SKILL.md."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="where to write the folder of skills")
        parser.add_argument("names", nargs="*", help="only these skills (default: all)")

    def handle(self, *args, directory, names, **options):
        skills = Skill.objects.all()
        if names:
            skills = skills.filter(name__in=names)
            missing = sorted(set(names) - set(skills.values_list("name", flat=True)))
            if missing:
                raise CommandError(f"no such skill: {', '.join(missing)}")
        for path in skills_export_folder(root=Path(directory), skills=skills):
            self.stdout.write(f"exported  {path}")
