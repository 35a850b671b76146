"""`manage.py warrant_bootstrap`: what a real deployment needs before anyone signs in, and nothing of
the demo. The platform's roles with their permissions and the default policies (governance.bootstrap),
and a first governance admin, named by

    WARRANT_ADMIN_USERNAME, WARRANT_ADMIN_EMAIL, and WARRANT_ADMIN_PASSWORD or WARRANT_ADMIN_PASSWORD_FILE

(or --username, --email, --password-file), or asked for on the terminal when there is one. Run it
after `migrate`, at every release if you like: a second run changes nothing and says so. An account
that exists is never changed, its password included.
"""

import getpass
import os
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from governance import bootstrap

NOTHING = "Nothing to change: the roles, their permissions, the default policies and a governance admin are in place."


class Command(BaseCommand):
    help = "Create the roles, permissions and default policies a deployment needs, and a first governance admin."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=None, help="the first governance admin (default $WARRANT_ADMIN_USERNAME)")
        parser.add_argument("--email", default=None, help="their email (default $WARRANT_ADMIN_EMAIL)")
        parser.add_argument("--password-file", default=None,
                            help="a file holding their password (default $WARRANT_ADMIN_PASSWORD_FILE, "
                                 "or the password itself in $WARRANT_ADMIN_PASSWORD)")
        parser.add_argument("--noinput", "--no-input", action="store_false", dest="interactive",
                            help="never prompt, even on a terminal")

    def handle(self, *args, username, email, password_file, interactive, **options):
        interactive = interactive and sys.stdin.isatty()
        admin = self._admin(username=username or os.environ.get("WARRANT_ADMIN_USERNAME", ""),
                            email=email if email is not None else os.environ.get("WARRANT_ADMIN_EMAIL", ""),
                            password_file=password_file or os.environ.get("WARRANT_ADMIN_PASSWORD_FILE", ""),
                            interactive=interactive)
        try:
            changes = bootstrap.bootstrap(admin=admin)
        except bootstrap.AdminProblem as exc:
            raise CommandError(str(exc)) from None
        for change in changes:
            self.stdout.write(change)
        self.stdout.write(self.style.SUCCESS(f"{len(changes)} change(s) made.") if changes else NOTHING)
        if not bootstrap.has_governance_admin():
            self.stderr.write(f"No active governance admin: {admin['username']!r} exists but is neither a superuser "
                              "nor in the governance admin role (left as it is).")

    def _admin(self, *, username: str, email: str, password_file: str, interactive: bool) -> dict | None:
        """The first governance admin to make, None when there is none to make."""
        if not username:
            if bootstrap.has_governance_admin():
                return None
            if not interactive:
                raise CommandError("there is no governance admin yet: set WARRANT_ADMIN_USERNAME and "
                                   "WARRANT_ADMIN_PASSWORD_FILE (or WARRANT_ADMIN_PASSWORD), or run this on a terminal")
            username = input("Username of the first governance admin: ").strip()
            if not username:
                raise CommandError("no username given")
        if get_user_model().objects.filter(username=username).exists():
            return {"username": username}  # left as it is
        password = _password(password_file) if password_file else os.environ.get("WARRANT_ADMIN_PASSWORD", "")
        if not password and interactive:
            if not email:
                email = input(f"Email of {username} (may be empty): ").strip()
            password = getpass.getpass(f"Password of {username}: ")
            if password != getpass.getpass("The same password again: "):
                raise CommandError("the two passwords differ")
        if not password:
            raise CommandError(f"no password for the new governance admin {username!r}: set WARRANT_ADMIN_PASSWORD_FILE "
                               "(or WARRANT_ADMIN_PASSWORD), or run this on a terminal")
        return {"username": username, "email": email, "password": password}


def _password(path: str) -> str:
    try:
        # One trailing line break is the file's, not the password's (echo and most editors add one).
        return Path(path).read_text(encoding="utf-8").removesuffix("\n").removesuffix("\r")
    except OSError as exc:
        raise CommandError(f"cannot read the password file {path}: {exc.strerror}") from None
