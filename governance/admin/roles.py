"""The workbench's roles with their grants, and the overview of which role may use which tool.

Naming and deleting a role follow governance.roles, as the API does: a name is words of letters,
digits and . @ + - _; deleting is refused for the governance admin role and for a role a policy
names as its approver.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.models import Group
from django.db.models import Count
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from agents.models import Tool
from core.permissions import is_governance_admin, reads_everything
from governance.roles import role_delete, role_delete_refusal, role_name_problem
from governance.models import Policy, Role, ToolGrant


class ToolGrantInline(admin.TabularInline):
    model = ToolGrant
    fk_name = "role"
    fields = ["tool", "granted_by", "granted_at"]
    readonly_fields = ["granted_by", "granted_at"]
    extra = 0


def role_overview_rows() -> tuple[list[dict], list[dict]]:
    """Per role: members, tools it may use, tools it approves (with the policy); and the tool x role matrix."""
    roles = list(Group.objects.annotate(members=Count("user", distinct=True)).order_by("name"))
    grants = {(g.role_id, g.tool.name) for g in ToolGrant.objects.select_related("tool")}
    policies = list(Policy.objects.filter(type="tool_approval", approver_role__isnull=False).order_by("name"))
    tools = list(Tool.objects.order_by("name"))
    rows = []
    for role in roles:
        approves = [(p, ["every tool"] if "*" in p.target_tools else p.target_tools)
                    for p in policies if p.approver_role_id == role.pk]
        rows.append({"role": role, "uses": sorted(t for r, t in grants if r == role.pk), "approves": approves})
    matrix = []
    for tool in tools:
        cells = []
        for role in roles:
            uses = (role.pk, tool.name) in grants
            approves = any(p.approver_role_id == role.pk and p.enabled and ("*" in p.target_tools or tool.name in p.target_tools)
                           for p in policies)
            cells.append(" and ".join(w for w, on in (("may use", uses), ("approves", approves)) if on) or "-")
        matrix.append({"tool": tool, "cells": cells})
    return rows, matrix


# Roles are edited here only (Django's own group admin goes), so every deletion meets the same rules.
admin.site.unregister(Group)


class RoleForm(forms.ModelForm):
    def clean_name(self):
        name = self.cleaned_data["name"]
        if "name" in self.changed_data and (problem := role_name_problem(name)):
            raise forms.ValidationError(problem)
        return name


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    """Per role: which tools it may use (grants) and which calls it approves."""

    form = RoleForm
    list_display = ["name", "tools", "approves"]
    inlines = [ToolGrantInline]
    fields = ["name", "approves"]
    readonly_fields = ["approves"]
    change_list_template = "admin/governance/role/change_list.html"

    @admin.display(description="may use")
    def tools(self, role):
        return ", ".join(role.tool_grants.values_list("tool__name", flat=True)) or "-"

    @admin.display(description="approves calls for")
    def approves(self, role):
        if not role.pk:
            return "-"
        return "; ".join(f"{p.name} ({', '.join(p.target_tools) or '-'}{'' if p.enabled else ', disabled'})"
                         for p in role.approval_policies.all()) or "-"

    def get_actions(self, request):
        # Without the bulk action every deletion passes delete_view, which applies the rules.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        role = self.get_object(request, unquote(object_id))
        if role is not None and (refusal := role_delete_refusal(role)):
            self.message_user(request, refusal.message, messages.ERROR)
            return redirect(reverse("admin:governance_role_change", args=[role.pk]))
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request, obj):
        role_delete(role=obj)

    def get_urls(self):
        return [path("overview/", self.admin_site.admin_view(self.overview_view), name="governance_role_overview")] \
            + super().get_urls()

    def overview_view(self, request):
        if not (is_governance_admin(request.user) or reads_everything(request.user)):
            return redirect("admin:index")
        rows, matrix = role_overview_rows()
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": "Roles and grants",
                   "rows": rows, "matrix": matrix, "roles": [r["role"] for r in rows]}
        return TemplateResponse(request, "admin/governance/role_overview.html", context)

@admin.register(ToolGrant)
class ToolGrantAdmin(admin.ModelAdmin):
    list_display = ["role", "tool", "granted_by", "granted_at"]
    list_filter = ["role"]
