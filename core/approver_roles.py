"""An approver role must have someone in it: the check, and the API field and admin form that apply it.

A request parked for a role nobody belongs to waits until it expires, with nobody told. So
naming such a role as an approver (a tool-approval policy, a tool, a tool source) is refused
when it is saved, and the ones already pointing at a role that lost its members are flagged
(governance.roles lists them for /readyz and the workbench).

Removing a role's last member is not refused, only flagged: taking access away (someone left,
an account was compromised) must never wait on fixing policies first, and a member goes in
more ways than one (removed from the group, deactivated, deleted).
"""

from django import forms
from django.contrib.auth.models import Group
from rest_framework import serializers


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
