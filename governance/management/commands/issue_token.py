"""Issue a new API token for a user, from the server's shell, and print its key (only that).

For server operators: whoever can run this already holds the database. The token is marked as
issued by this command, with the operating-system user who ran it, so a decision taken with it
can be traced back to how the key came to exist.
"""


from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.shell import os_user
from governance.models import ApiToken
from governance.tokens import token_issue


class Command(BaseCommand):
    help = "Issue a new API token for USERNAME and print its key (shown this once; only its digest is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?", default="")
        parser.add_argument("--name", default="", help="What the token is for (shown in the admin).")
        parser.add_argument("--days", type=int, default=None,
                            help="Days until it expires (default WARRANT_TOKEN_TTL_DAYS; 0 = never).")

    def handle(self, *args, username, name, days, **options):
        if not username:
            raise CommandError("name the user: manage.py issue_token USERNAME (make -s token USER=USERNAME)")
        if days is not None and days < 0:
            raise CommandError("--days is 0 (never expires) or more")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive: a token would not work")
        # A trigger's service account acts only through its trigger: with a key, a person would be
        # behind its runs. (By the relation's name: governance does not import triggers, whose
        # guard refuses the token too.)
        if hasattr(user, "service_account"):
            raise CommandError(f"{username!r} is a service account: it acts only through its triggers, "
                               "and no token is issued to it")
        operator = os_user()
        _, key = token_issue(user=user, via=ApiToken.Issued.COMMAND, issued_by=operator[:150],
                             name=name[:100], ttl_days=days)
        self.stdout.write(key)
