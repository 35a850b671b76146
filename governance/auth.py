"""How people prove who they are: login throttling and lockout (django-axes) for the login
forms (the admin and the browsable API), and API tokens for everything else."""

import logging
from datetime import timedelta
from functools import lru_cache

from axes.backends import AxesStandaloneBackend
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from core import stamp as governance_stamp
from governance.models import ApiToken
from governance.rows import converted
from governance.tokens import key_digest, seal_holds

logger = logging.getLogger(__name__)


class LockoutBackend(AxesStandaloneBackend):
    """Refuses a locked-out username and address before any password is checked.

    Only web logins are throttled: an authenticate() without a request (a management command, a
    test client's login) has no address to count against, so this backend stays out of its way.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request) -> str:
    """The address failed logins are counted under: the proxy's header when configured, else the peer."""
    from django.conf import settings

    header = settings.WARRANT_CLIENT_IP_HEADER
    if header and request.META.get(header):
        return request.META[header].split(",")[0].strip()
    return request.META.get("REMOTE_ADDR", "")


# --- API tokens ---------------------------------------------------------------------------

# last_used_at is written when it is older than this, so a busy token costs one write per few
# minutes, not one per request.
LAST_USED_RESOLUTION = timedelta(minutes=5)


class ApiTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` against governance.ApiToken, answered by one statement: the
    token found by the key's digest, its user and the governance stamp
    (request.auth.governance_stamp). An unknown, revoked or expired key, or an inactive user, is
    401."""

    def authenticate_credentials(self, key):
        digest = key_digest(key) if isinstance(key, str) else None
        found = list(get_user_model().objects.raw(_token_sql(), [digest])) if digest else []
        if not found:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = found[0]
        read = {field.attname: converted(field, getattr(user, f"token_{field.name}")) for field in _token_fields()}
        read["user_id"] = user.pk
        # As a model query hands it on: stored, the columns read in field order, the rest deferred.
        token = ApiToken.from_db(connection.alias, tuple(read), [
            read[field.attname] for field in ApiToken._meta.concrete_fields if field.attname in read])
        if not seal_holds(token=token, digest=digest):
            # A row the server did not write (or one edited since): to the client, an unknown key.
            logger.warning("token %s of user %s carries no valid seal: refused", token.public_id, user.pk)
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(_("Token revoked."))
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed(_("Token expired."))
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            _mark_used(token, now)
        token.user, token.governance_stamp = user, user.governance_stamp
        return user, token


def _mark_used(token, now) -> None:
    try:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    except DatabaseError as exc:  # bookkeeping: a busy database must not turn a valid token away
        logger.warning("could not record the use of token %s: %s", token.public_id, exc)


_TOKEN_COLUMNS = ("id", "public_id", "created_at", "expires_at", "last_used_at", "revoked_at", "seal")


@lru_cache(maxsize=1)
def _token_fields() -> tuple:
    return tuple(ApiToken._meta.get_field(name) for name in _TOKEN_COLUMNS)


@lru_cache(maxsize=1)
def _token_sql() -> str:
    """The user's columns (as RawQuerySet reads a user), the token's own as token_<name>, and the
    stamp, for one key digest."""
    qn = connection.ops.quote_name
    users, tokens = get_user_model()._meta, ApiToken._meta
    columns = ", ".join(f"u.{qn(field.column)}" for field in users.concrete_fields)
    token_columns = ", ".join(f"t.{qn(tokens.get_field(name).column)} AS token_{name}" for name in _TOKEN_COLUMNS)
    return (f"SELECT {columns}, {token_columns}, "
            f"(SELECT stamp FROM {qn(governance_stamp.STAMP_TABLE)} WHERE id = 1) AS governance_stamp "
            f"FROM {qn(tokens.db_table)} t INNER JOIN {qn(users.db_table)} u "
            f"ON u.{qn(users.pk.column)} = t.{qn(tokens.get_field('user').column)} "
            f"WHERE t.{qn(tokens.get_field('digest').column)} = %s")
