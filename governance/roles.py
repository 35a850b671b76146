"""Roles (Django groups): creating and deleting one, the approver roles nobody is in, and who
set up whose account.

The rule an approver role must follow, and the field and form that apply it, are in
core.approver_roles; what is flagged when a role loses its members is listed here.
"""

import re

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import Count, ProtectedError, Q

from agents.models import Tool, ToolSource
from core.accounts import account_set_up_by, accounts_set_up_by  # noqa: F401 (runs.approvals, runs.standing)
from core.api_errors import Conflict, DomainError
from governance.models import Policy

# A role's name: words of letters, digits and . @ + - _, single spaces between them. ASCII, spelt
# out: Python's \w takes any letter ("ª", "é"), the schema's (ECMA-262) only ASCII ones, and the
# API must refuse what the schema it publishes refuses.
ROLE_NAME_PATTERN = r"^[A-Za-z0-9_.@+-]+( [A-Za-z0-9_.@+-]+)*$"
ROLE_NAME_RULE = "Use letters, digits, single spaces and . @ + - _ only."

# Who counts: active accounts only, since an inactive one cannot sign in to decide.
_ACTIVE_MEMBERS = Count("user", filter=Q(user__is_active=True), distinct=True)


def unstaffed_approver_roles() -> list[dict]:
    """Everything that names an approver role without active members: what it is and which role."""
    empty = set(Group.objects.annotate(members=_ACTIVE_MEMBERS).filter(members=0).values_list("name", flat=True))
    if not empty:
        return []
    found = [{"kind": "policy", "name": name, "role": role, "enabled": enabled}
             for name, role, enabled in Policy.objects.filter(approver_role__name__in=empty)
             .values_list("name", "approver_role__name", "enabled").order_by("name")]
    found += [{"kind": "tool", "name": name, "role": role, "enabled": enabled}
              for name, role, enabled in Tool.objects.filter(approver_role__name__in=empty)
              .values_list("name", "approver_role__name", "enabled").order_by("name")]
    found += [{"kind": "tool_source", "name": name, "role": role, "enabled": enabled}
              for name, role, enabled in ToolSource.objects.filter(approver_role__name__in=empty)
              .values_list("name", "approver_role__name", "enabled").order_by("name")]
    taint_role = settings.WARRANT.get("TAINT_APPROVER_ROLE", "")
    if taint_role in empty:
        found.append({"kind": "setting", "name": "WARRANT_TAINT_APPROVER_ROLE", "role": taint_role, "enabled": True})
    return found


def describe(entry: dict) -> str:
    what = {"policy": "policy", "tool": "tool", "tool_source": "tool source", "setting": "setting"}[entry["kind"]]
    state = "" if entry["enabled"] else " (disabled)"
    return f"{what} {entry['name']}{state} names the approver role {entry['role']!r}, which has no active members"


def role_name_problem(name: str) -> str | None:
    return None if re.fullmatch(ROLE_NAME_PATTERN, name) else ROLE_NAME_RULE


def role_create(*, name: str) -> Group:
    """A new role; Conflict when one has that name already (also when another request made it first)."""
    if problem := role_name_problem(name):
        raise DomainError(problem, details={"name": name})
    try:
        with transaction.atomic():
            return Group.objects.create(name=name)
    except IntegrityError:
        raise Conflict(f"a role named {name!r} already exists", details={"name": name}) from None


def role_delete_refusal(role: Group) -> Conflict | None:
    """Why `role` may not be deleted, or None: the governance admin role stays, and a role a
    policy names as its approver is kept until the policy names another."""
    if role.name == settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]:
        return Conflict("the governance admin role cannot be deleted", details={"role": role.name})
    approves = sorted(role.approval_policies.values_list("name", flat=True))
    if approves:
        return Conflict(f"role {role.name!r} approves for policies; change them first",
                        details={"role": role.name, "policies": approves})
    return None


def role_delete(*, role: Group) -> None:
    if refusal := role_delete_refusal(role):
        raise refusal
    try:
        role.delete()
    except ProtectedError as exc:
        # Approval requests (past or pending) name the role: deleting it would orphan the record.
        raise Conflict(f"role {role.name!r} is referenced by {len(exc.protected_objects)} record(s)",
                       details={"role": role.name}) from None
