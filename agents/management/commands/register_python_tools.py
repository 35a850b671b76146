"""Register Python functions as tools: `manage.py register_python_tools SOURCE DOTTED.PATH`.

The path names a function, or a module whose `__all__` lists functions. Each becomes a tool
named SOURCE__function, its JSON schema derived from the type hints, disabled and granted to
no role until a governance admin enables and grants it. Running it again re-syncs: a function
whose docstring or signature changed is held until re-approved.
"""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents import sources
from agents.models import Tool, ToolSource


class Command(BaseCommand):
    help = "Register (or re-sync) the Python functions at a dotted path as tools of one source."

    def add_arguments(self, parser):
        parser.add_argument("source", help="the source's name (a slug; its tools are named SOURCE__function)")
        parser.add_argument("path", help="dotted path of a function, or of a module listing its functions in __all__")
        parser.add_argument("--timeout", type=float, default=10.0, help="per-call timeout in seconds (default 10)")
        parser.add_argument("--side-effect", action="store_true",
                            help="mark new tools side-effecting (executed once, through the outbox)")

    def handle(self, *args, source, path, timeout, side_effect, **options):
        row = ToolSource.objects.filter(name=source).first()
        try:
            if row is None:
                row = sources.tool_source_create(values={"name": source, "kind": "python", "path": path,
                                                         "timeout_seconds": timeout})
            elif row.kind != ToolSource.Kind.PYTHON:
                raise CommandError(f"the source {source!r} is a {row.kind} source, not a python one")
            elif row.path != path:
                row = sources.tool_source_update(source=row, values={"path": path})
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        report = sources.tool_source_sync(source=row)
        if not report["ok"]:
            raise CommandError(report["error"]["message"])
        if side_effect and report["created"]:
            Tool.objects.filter(name__in=report["created"]).update(side_effect=True)
        for outcome in ("created", "changed", "unchanged", "removed"):
            for name in report[outcome]:
                self.stdout.write(f"{outcome:<9} {name}")
        for entry in report["rejected"]:
            self.stdout.write(f"rejected  {entry['name']}: {entry['reason']}")
        if report["created"]:
            self.stdout.write("New tools are disabled and granted to no role: enable and grant them in the admin or API.")
