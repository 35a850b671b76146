"""A service account acts only through its triggers: nothing may give it a way to sign in or a token.

Its password is unusable from the start (services.service_account_create). These receivers hold
that whatever path is taken: Django's `changepassword`, a shell's set_password, a token issued by
`issue_token` or any caller of governance.tokens.token_issue, and a session opened without a
password (login() after force_login, a custom sign-in). Each refuses with PermissionDenied, which a
view answers 403 and a command reports. They sit here, not in governance, because governance sits
below triggers and cannot know what a service account is.
"""

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

from triggers.models import ServiceAccount

REFUSAL = "{name} is a service account: it acts only through its triggers, and has no password, session or token"


def is_service_account(user) -> bool:
    return user is not None and user.pk is not None and ServiceAccount.objects.filter(user_id=user.pk).exists()


def refuse_password(sender, instance, update_fields=None, **_) -> None:
    """pre_save of the user model: a usable password on a service account is refused."""
    if update_fields is not None and "password" not in update_fields:
        return  # last_login and the like: the password is not being written
    if instance.has_usable_password() and is_service_account(instance):
        raise PermissionDenied(REFUSAL.format(name=instance.get_username()))


def refuse_token(sender, instance, **_) -> None:
    """pre_save of governance.ApiToken: no new token for a service account."""
    if instance.pk is None and is_service_account(instance.user):
        raise PermissionDenied(REFUSAL.format(name=instance.user.get_username()))


def refuse_session(sender, request, user, **_) -> None:
    """user_logged_in: a session just opened for a service account is closed again before the
    answer saves it, and the sign-in refused."""
    if is_service_account(user):
        if request is not None and hasattr(request, "session"):
            request.session.flush()
            request.user = AnonymousUser()
        raise PermissionDenied(REFUSAL.format(name=user.get_username()))
