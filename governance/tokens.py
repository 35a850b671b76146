"""API tokens: issued with a secret shown once, kept only as its digest, expiring, revocable.

A key reads `wt_<public id>_<secret>`. The public id names the token wherever it must be named
(the admin, its owner's list, a decision's `decided_via`) without being enough to use it.
"""

import hashlib
import secrets
from datetime import UTC, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from governance.models import ApiToken

KEY_PREFIX = "wt_"
SEAL_SALT = "warrant.api-token"


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def default_ttl_days() -> int:
    """WARRANT_TOKEN_TTL_DAYS; 0 means tokens never expire (not advised)."""
    return settings.WARRANT["TOKEN_TTL_DAYS"]


def token_issue(*, user, via: str, issued_by: str, name: str = "", ttl_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token for `user` and its key. The key exists only in the return value: what is
    stored cannot give it back."""
    days = default_ttl_days() if ttl_days is None else ttl_days
    public_id = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{public_id}_{secrets.token_urlsafe(32)}"
    token = ApiToken(public_id=public_id, digest=key_digest(key), user=user, name=name, issued_via=via,
                     issued_by=issued_by, expires_at=timezone.now() + timedelta(days=days) if days else None)
    token.seal = token_seal(public_id=public_id, digest=token.digest, user_id=user.pk, expires_at=token.expires_at)
    token.save()
    return token, key


def token_seal(*, public_id: str, digest: str, user_id: int, expires_at, secret=None) -> str:
    """What binds a token row to the server: whoever holds only the database (a DBA, a backup)
    cannot issue a row, move one to another user or extend its life, because they lack the key.
    Django's sessions are signed with the same key for the same reason."""
    expiry = expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") if expires_at else ""
    return salted_hmac(SEAL_SALT, f"{public_id}|{digest}|{user_id}|{expiry}", secret=secret,
                       algorithm="sha256").hexdigest()


def seal_holds(*, token: ApiToken, digest: str) -> bool:
    """The row's seal is the server's, under SECRET_KEY or one of SECRET_KEY_FALLBACKS."""
    for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS):
        expected = token_seal(public_id=token.public_id, digest=digest, user_id=token.user_id,
                              expires_at=token.expires_at, secret=secret)
        if constant_time_compare(token.seal, expected):
            return True
    return False


def token_revoke(*, token: ApiToken, by: str) -> ApiToken:
    """Revoked from now on; a token already revoked keeps its first revocation."""
    if token.revoked_at is None:
        token.revoked_at, token.revoked_by = timezone.now(), by
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=token.revoked_at, revoked_by=by)
    return token


def token_state(token: ApiToken, now=None) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= (now or timezone.now()):
        return "expired"
    return "active"


def auth_via(request) -> str:
    """How the request's user authenticated, as a decision records it: 'token:<public id>' or
    'session' (anything else is named by its authentication class, e.g. 'forced' in tests)."""
    from rest_framework.authentication import SessionAuthentication

    if isinstance(getattr(request, "auth", None), ApiToken):
        return f"token:{request.auth.public_id}"
    authenticator = getattr(request, "successful_authenticator", None)
    if authenticator is None or isinstance(authenticator, SessionAuthentication):
        # A Django view (the workbench) has no DRF authenticator: it is signed in by session.
        return "session"
    return type(authenticator).__name__.removesuffix("Authentication").lower() or "unknown"
