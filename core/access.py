"""A user's roles and model permissions, read once per governance stamp.

Both come from tables the governance stamp covers (memberships, group and user permissions), so
a kept answer is dropped by the next change to any of them. is_active and is_superuser are not
kept: they come with the user row that authentication reads on every request.
"""

from dataclasses import dataclass

from django.contrib.auth.models import Permission

from core import stamp as governance_stamp

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
    return Access(roles=tuple(sorted(user.groups.values_list("name", flat=True))), permissions=frozenset(names))


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
