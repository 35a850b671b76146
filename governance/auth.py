"""How people prove who they are: login throttling and lockout (django-axes) for the login
forms (the admin and the browsable API), and API tokens for everything else."""

import logging
from datetime import timedelta

from axes.backends import AxesStandaloneBackend
from django.db import DatabaseError
from django.db.models import Subquery
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from governance.models import ApiToken, GovernanceStamp
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
        found = list(ApiToken.objects.select_related("user").only(*_TOKEN_COLUMNS, "user")
                     .annotate(governance_stamp=Subquery(GovernanceStamp.objects.filter(id=1).values("stamp")[:1]))
                     .filter(digest=digest)[:1]) if digest else []
        if not found:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token = found[0]
        user = token.user
        user.governance_stamp = token.governance_stamp
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
        return user, token


def _mark_used(token, now) -> None:
    try:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    except DatabaseError as exc:  # bookkeeping: a busy database must not turn a valid token away
        logger.warning("could not record the use of token %s: %s", token.public_id, exc)


_TOKEN_COLUMNS = ("id", "public_id", "created_at", "expires_at", "last_used_at", "revoked_at", "seal")
