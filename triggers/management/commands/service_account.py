"""Make a service account from the server's shell: a user nobody signs in as, in the roles named.

    manage.py service_account helpdesk-bot --role operators --description "helpdesk tickets"

A trigger then runs as it (docs/triggers.md). Its roles are changed later like anyone's, in the
workbench's roles.
"""

from django.core.management.base import BaseCommand, CommandError

from core.api_errors import DomainError
from triggers.services import service_account_create


class Command(BaseCommand):
    help = "Make a service account USERNAME (unusable password) in the roles given with --role."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", action="append", default=[], help="A role it holds (repeat for more).")
        parser.add_argument("--description", default="")

    def handle(self, *args, username, role, description, **options):
        try:
            account = service_account_create(username=username, roles=role, description=description)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        roles = ", ".join(sorted(role)) or "no roles"
        self.stdout.write(f"service account {account.user.get_username()} ({roles})")
