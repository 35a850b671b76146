"""A user's roles and model permissions, read once per governance stamp.

Both come from tables the governance stamp covers (memberships, group and user permissions), so
a kept answer is dropped by the next change to any of them. is_active and is_superuser are not
kept: they come with the user row that authentication reads on every request.
"""

from dataclasses import dataclass
from functools import lru_cache

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from governance import stamp as governance_stamp
from governance.models import StampedToken
from governance.rows import converted
from governance.selectors import user_role_names

_kept = governance_stamp.Kept(limit=10_000)


@dataclass(frozen=True)
class Access:
    roles: tuple[str, ...]
    permissions: frozenset[str]  # "app_label.codename", as ModelBackend names them


def _load(user) -> Access:
    # ModelBackend's rule: the user's own permissions and those of every group they belong to.
    fields = ("content_type__app_label", "codename")
    held = Permission.objects.filter(user=user).order_by().values_list(*fields).union(
        Permission.objects.filter(group__user=user).order_by().values_list(*fields))
    names = {f"{app}.{codename}" for app, codename in held}
    return Access(roles=tuple(user_role_names(user)), permissions=frozenset(names))


def access_of(user, *, stamp: str | None = None) -> Access:
    """`stamp`: the governance stamp this request already read, if any."""
    return _kept.get_or_load(user.pk, lambda: _load(user), stamp=stamp)


def has_model_permission(user, permission: str, *, stamp: str | None = None) -> bool:
    """user.has_perm(permission) under ModelBackend, answered from what the stamp keeps."""
    if not (user and user.is_active):
        return False
    return user.is_superuser or permission in access_of(user, stamp=stamp).permissions


def clear() -> None:
    _kept.clear()


class StampedTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, answered by one statement: the token, its user and the
    governance stamp (request.auth.governance_stamp). Same answers and errors as DRF's: an
    unknown key or an inactive user is 401."""

    model = StampedToken

    def authenticate_credentials(self, key):
        found = list(get_user_model().objects.raw(_token_sql(), [key])) if isinstance(key, str) else []
        if not found:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = found[0]
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        # As a model query hands it on: stored (not to be inserted again), its time converted.
        token = StampedToken.from_db(connection.alias, ("key", "user_id", "created"),
                                     (key, user.pk, converted(StampedToken._meta.get_field("created"), user.token_created)))
        token.user, token.governance_stamp = user, user.governance_stamp
        return user, token


@lru_cache(maxsize=1)
def _token_sql() -> str:
    """The user's columns (as RawQuerySet reads a user), with the token's creation time and the
    stamp, for one token key. DRF builds and compiles a model query (token with its user) for
    this on every request."""
    qn = connection.ops.quote_name
    users, tokens = get_user_model()._meta, StampedToken._meta
    columns = ", ".join(f"u.{qn(field.column)}" for field in users.concrete_fields)
    token_column = {field.name: qn(field.column) for field in tokens.concrete_fields}
    return (f"SELECT {columns}, t.{token_column['created']} AS token_created, "
            f"(SELECT stamp FROM {qn(governance_stamp.STAMP_TABLE)} WHERE id = 1) AS governance_stamp "
            f"FROM {qn(tokens.db_table)} t INNER JOIN {qn(users.db_table)} u ON u.{qn(users.pk.column)} = t.{token_column['user']} "
            f"WHERE t.{token_column['key']} = %s")
