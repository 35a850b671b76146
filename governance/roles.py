"""An approver role must have someone in it.

A request parked for a role nobody belongs to waits until it expires, with nobody told. So
naming such a role as an approver (a tool-approval policy, a tool, a tool source) is refused
when it is saved, and the ones already pointing at a role that lost its members are flagged
(/readyz, the workbench).

Removing a role's last member is not refused, only flagged: taking access away (someone left,
an account was compromised) must never wait on fixing policies first, and a member goes in
more ways than one (removed from the group, deactivated, deleted).
"""

from django import forms
from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Count, Q
from rest_framework import serializers

# Who counts: active accounts only, since an inactive one cannot sign in to decide.
_ACTIVE_MEMBERS = Count("user", filter=Q(user__is_active=True), distinct=True)


def role_members(role: Group) -> int:
    return role.user_set.filter(is_active=True).count()


def unstaffed_problem(role: Group | None) -> str | None:
    """Why `role` cannot be an approver role, or None (also for no role at all)."""
    if role is None or role.pk is None:
        return None
    if role_members(role) == 0:
        return (f"the role {role.name!r} has no active members: a request parked for it would wait, unseen, "
                "until it expires. Add someone to the role first.")
    return None


def unstaffed_approver_roles() -> list[dict]:
    """Everything that names an approver role without active members: what it is and which role."""
    from agents.models import Tool, ToolSource
    from governance.models import Policy

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


class StaffedRoleField(serializers.SlugRelatedField):
    """An approver role by name, refused (400, saying why) when nobody active is in it."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="name", queryset=Group.objects.all(), **kwargs)

    def to_internal_value(self, data):
        role = super().to_internal_value(data)
        if problem := unstaffed_problem(role):
            raise serializers.ValidationError(problem)
        return role


class StaffedApproverRoleForm(forms.ModelForm):
    """An admin form for a model with an `approver_role`: choosing an unstaffed role is a form
    error (one chosen before it lost its members does not block other edits; it is flagged)."""

    def clean_approver_role(self):
        role = self.cleaned_data.get("approver_role")
        if "approver_role" in self.changed_data and (problem := unstaffed_problem(role)):
            raise forms.ValidationError(problem)
        return role


def account_set_up_by(*, user, by_user_id: int) -> bool:
    """Whether `by_user_id` created `user`'s account, or changed its roles, in the workbench
    (Django's admin log). A superuser who makes an account, or puts one in the approver role,
    would otherwise approve their own runs through it."""
    from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType

    # Followed through every account set up that way: a puppet the caller made can make the next
    # one, which the caller never touched.
    accounts = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(get_user_model()), action_flag__in=(ADDITION, CHANGE))
    reached = frontier = {str(by_user_id)}
    while frontier:
        set_up = {object_id for object_id, flag, message in accounts.filter(user_id__in=frontier)
                  .values_list("object_id", "action_flag", "change_message")
                  if flag == ADDITION or "groups" in message.lower()}
        if str(user.pk) in set_up:
            return True
        frontier = set_up - reached
        reached |= frontier
    return False
