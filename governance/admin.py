"""The governance side of the workbench: policies (edit, enable, scope, history with diffs), the
policy lab, and roles with their grants. Writes go through governance.services, the dry run
through governance.evaluation: the admin decides nothing the API would decide differently."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import FORMFIELD_FOR_DBFIELD_DEFAULTS
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from core.admin import ReadOnlyAdmin
from agents.models import Agent, Tool
from governance import engine, services
from governance.diffs import values_diff
from governance.evaluation import MAX_EVALUATE_INPUT_CHARS, hidden_tools, policy_evaluate
from core.parsers import loads_bounded
from governance.models import ApiToken, Policy, PolicyVersion, Role, ToolGrant
from core.permissions import is_governance_admin, reads_everything
from governance.roles import describe, unstaffed_approver_roles, unstaffed_problem
from governance.selectors import policy_spec
from governance.tokens import token_revoke, token_state


class BoundedJSONFormField(forms.JSONField):
    """The admin's JSON fields, with nesting bounded as in the API: a deep value is the field's
    "Enter a valid JSON." error, not a RecursionError (a 500)."""

    def to_python(self, value):
        if not self.disabled and isinstance(value, str) and value.strip():
            try:
                loads_bounded(value, cls=self.decoder)
            except ValueError:
                raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value}) from None
        return super().to_python(value)

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return forms.fields.InvalidJSONInput(data)


# Every ModelAdmin edits JSON model fields through it: those registered from here on (skills,
# runs) by default, those registered already (agents, imported above) in place.
FORMFIELD_FOR_DBFIELD_DEFAULTS[models.JSONField] = {"form_class": BoundedJSONFormField}
for _registered in admin.site._registry.values():
    _registered.formfield_overrides.setdefault(models.JSONField, {})["form_class"] = BoundedJSONFormField


class WordListField(forms.CharField):
    """A list typed one item per line (commas also separate); a JSON list is accepted as well."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(value)
        if isinstance(value, str) and value.startswith("["):
            try:
                return "\n".join(loads_bounded(value))
            except (ValueError, TypeError):
                return value
        return value

    def to_python(self, value):
        text = (value or "").strip()
        if text.startswith("["):
            try:
                items = loads_bounded(text)
            except ValueError:
                raise ValidationError("Write one item per line (or a JSON list of strings).") from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise ValidationError("Write one item per line (or a JSON list of strings).")
        else:
            items = [part for line in text.splitlines() for part in line.split(",")]
        return [item.strip() for item in items if item.strip()]


class PolicyAdminForm(forms.ModelForm):
    keywords = WordListField(required=False, help_text="One word or phrase per line; whole words, any case.")
    target_tools = WordListField(required=False, help_text="One tool name per line, or * for every tool.")
    # The version the editor opened: a save on top of someone else's newer version is refused, not merged.
    expected_version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1)

    class Meta:
        model = Policy
        fields = "__all__"
        widgets = {"agents": forms.CheckboxSelectMultiple}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["expected_version"].required = True
            self.fields["expected_version"].initial = self.instance.version

    def clean_expected_version(self):
        expected = self.cleaned_data.get("expected_version")
        if self.instance.pk is None:
            return None
        # The admin's change view runs in one transaction: the row lock (a write lock on SQLite) is held
        # until the save, so no other edit can land between this check and it.
        current = Policy.objects.select_for_update().filter(pk=self.instance.pk).first()
        if current is not None and expected != current.version:
            last = PolicyVersion.objects.filter(policy_id=current.pk).order_by("-version").select_related("changed_by").first()
            who = f" by {last.changed_by}" if last and last.changed_by else ""
            raise ValidationError(
                f"This policy was changed{who} while you were editing it: it is now version {current.version}, "
                f"you opened version {expected}. Nothing was saved. Open the policy again to see its current "
                "values (its history shows what changed), then make your change on top of them.")
        return expected

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        # The same checks the engine applies at run time, so a policy that would fail closed never saves.
        candidate = Policy(**{k: v for k, v in data.items() if k not in ("agents", "expected_version")})
        candidate.pk = self.instance.pk
        problems = engine.validate(policy_spec(candidate, agent_slugs=[a.slug for a in data.get("agents") or []]))
        for problem in problems:
            field = next((f for f in ("regex", "approver_role", "target_tools", "keywords", "content", "response")
                          if f.split("_")[0] in problem), None)
            self.add_error(field, problem)
        if data.get("enabled") and (unstaffed := unstaffed_problem(data.get("approver_role"))):
            self.add_error("approver_role", unstaffed)
        return data


# --- roles and grants -------------------------------------------------------------------


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


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    """Per role: which tools it may use (grants) and which calls it approves."""

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


# --- policies ---------------------------------------------------------------------------


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    form = PolicyAdminForm
    list_display = ["name", "type", "state", "scope", "priority", "version", "updated_at", "history_link"]
    list_filter = ["type", "enabled", "agents"]
    search_fields = ["name", "description", "content"]
    readonly_fields = ["version", "created_at", "updated_at"]
    actions = ["enable", "disable"]
    fieldsets = [
        (None, {"fields": ["name", "type", "description", "enabled", "priority"]}),
        ("Where it applies", {"fields": ["agents"]}),
        ("When it fires", {"fields": ["keywords", "match_mode", "regex", "target_tools"]}),
        ("What it does", {"fields": ["content", "response", "approver_role", "approval_ttl_seconds"]}),
        ("Version", {"fields": ["version", "created_at", "updated_at", "expected_version"]}),
    ]

    @admin.display(description="state", ordering="enabled")
    def state(self, policy):
        return "Enabled" if policy.enabled else "Disabled"

    @admin.display(description="applies to")
    def scope(self, policy):
        return ", ".join(a.slug for a in policy.agents.all()) or "every agent"

    @admin.display(description="history")
    def history_link(self, policy):
        return format_html('<a href="{}">versions and diffs</a>', reverse("admin:governance_policy_versions", args=[policy.pk]))

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("agents")

    def save_model(self, request, obj, form, change):
        # Every change goes through the service so that it writes a history row.
        values = {name: form.cleaned_data[name] for name in form.cleaned_data if name not in ("agents", "expected_version")}
        values["agents"] = list(form.cleaned_data.get("agents", []))
        if change:
            saved = services.policy_update(policy=Policy.objects.get(pk=obj.pk), values=values, user=request.user)
        else:
            saved = services.policy_create(values=values, user=request.user)
        obj.pk, obj.version = saved.pk, saved.version

    def save_related(self, request, form, formsets, change):
        pass  # agents were set by the service

    def delete_model(self, request, obj):
        services.policy_delete(policy=obj, user=request.user)

    def delete_queryset(self, request, queryset):
        for policy in queryset:
            services.policy_delete(policy=policy, user=request.user)

    def _set_enabled(self, request, queryset, enabled: bool) -> None:
        changed = 0
        for policy in queryset:
            if policy.enabled != enabled:
                try:
                    services.policy_update(policy=policy, values={"enabled": enabled}, user=request.user)
                except ValidationError as exc:  # e.g. its approver role has no members
                    self.message_user(request, f"{policy.name} was not enabled: {' '.join(exc.messages)}", messages.ERROR)
                    continue
                changed += 1
        self.message_user(request, f"{changed} policy(ies) {'enabled' if enabled else 'disabled'}; each change is a new version.")

    def changelist_view(self, request, extra_context=None):
        # Said where policies are kept: a request parked for a role with nobody in it waits unseen.
        if request.method == "GET":
            for entry in unstaffed_approver_roles():
                messages.warning(request, f"Nobody can decide: {describe(entry)}.")
        return super().changelist_view(request, extra_context)

    @admin.action(description="Enable selected policies", permissions=["change"])
    def enable(self, request, queryset):
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected policies", permissions=["change"])
    def disable(self, request, queryset):
        self._set_enabled(request, queryset, False)

    def get_urls(self):
        return [
            path("lab/", self.admin_site.admin_view(self.lab_view), name="governance_policy_lab"),
            path("<int:policy_id>/versions/", self.admin_site.admin_view(self.versions_view), name="governance_policy_versions"),
        ] + super().get_urls()

    def versions_view(self, request, policy_id):
        if not self.has_view_permission(request):
            return redirect("admin:index")
        policy = get_object_or_404(Policy, pk=policy_id)
        versions = [{"entry": v, "changes": values_diff(v.old_values, v.new_values)}
                    for v in PolicyVersion.objects.filter(policy=policy).select_related("changed_by").order_by("-version", "-id")]
        context = {**self.admin_site.each_context(request), "opts": self.opts, "original": policy,
                   "title": f"History of {policy.name}", "versions": versions}
        return TemplateResponse(request, "admin/governance/policy/versions.html", context)

    def lab_view(self, request):
        if not is_governance_admin(request.user):
            messages.error(request, "Only governance admins may use the policy lab.")
            return redirect("admin:index")
        form = PolicyLabForm(request.GET if "input" in request.GET else None)
        result = error = hidden = None
        if form.is_bound and form.is_valid():
            agent, role = form.cleaned_data["agent"], form.cleaned_data["role"]
            try:
                result = policy_evaluate(agent=agent, role=role.name if role else None, text=form.cleaned_data["input"])
            except engine.PolicyEvaluationError as exc:
                error = f"policy {exc.policy} cannot be evaluated: {exc.reason}. A run would fail closed (policy_error)."
            else:
                hidden = hidden_tools(agent=agent, role=role.name if role else None, shown=[t["name"] for t in result["tools"]])
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": "Policy lab",
                   "form": form, "result": result, "error": error, "hidden": hidden,
                   "fired": lab_fired(result) if result else []}
        return TemplateResponse(request, "admin/governance/policy/lab.html", context)


class PolicyLabForm(forms.Form):
    input = forms.CharField(label="Request text", max_length=MAX_EVALUATE_INPUT_CHARS, strip=False,
                            widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Delete the account Initech."}))
    agent = forms.ModelChoiceField(queryset=Agent.objects.order_by("slug"), to_field_name="slug", required=False,
                                   empty_label="No agent: only policies for every agent")
    role = forms.ModelChoiceField(queryset=Group.objects.order_by("name"), to_field_name="name", required=False,
                                  empty_label="Any role: no grant filter", label="Caller's role")

    def clean_agent(self):
        agent = self.cleaned_data["agent"]
        if agent is not None and agent.current_version is None:
            raise ValidationError(f"agent {agent.slug} has no published version")
        return agent


def lab_fired(result: dict) -> list[dict]:
    """Every decision of a dry run as one table: policy, version, type, matched words, effect."""
    rows = []
    if result["intent_guard"]:
        rows.append(result["intent_guard"] | {"effect": "blocks the run before any model call"})
    rows += [p | {"effect": "adds its steps to the system prompt"} for p in result["playbooks"]]
    for tool in result["tools"]:
        rows += [g | {"effect": f"guides the model's use of {tool['name']}"} for g in tool["guides"]]
        approval = tool["approval"]
        if approval and approval["policy"]:
            rows.append(approval | {"effect": f"parks {tool['name']} for {approval['approver_role']}"})
    if result["output_formatter"]:
        rows.append(result["output_formatter"] | {"effect": "reshapes the final answer"})
    return rows


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["policy_name", "version", "action", "changed_by", "changed_at"]
    list_filter = ["action"]
    readonly_fields = ["policy_name", "version", "action", "changed_by", "changed_at", "diff"]

    @admin.display(description="what changed")
    def diff(self, entry):
        rows = values_diff(entry.old_values, entry.new_values)
        if not rows:
            return "no change"
        return format_html_join(mark_safe("<br>"), "<strong>{}</strong>: {} &rarr; {}",
                                ((r["field"], r["before"] or "(empty)", r["after"] or "(empty)") for r in rows))


@admin.register(ToolGrant)
class ToolGrantAdmin(admin.ModelAdmin):
    list_display = ["role", "tool", "granted_by", "granted_at"]
    list_filter = ["role"]


# --- API tokens -------------------------------------------------------------------------


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Who holds which token, since when, until when, last used: never a key, which is not
    stored. No one issues a token here, for themselves or anyone else (a key for another user
    would let its issuer act, and approve, as them): owners issue theirs through the API, server
    operators with `manage.py issue_token`. Tokens are revoked, never deleted, so the
    `token:<id>` a decision names stays traceable."""

    list_display = ["public_id", "user", "name", "state", "issued_via", "issued_by", "created_at", "expires_at",
                    "last_used_at", "revoked_at", "revoked_by"]
    list_filter = ["issued_via", ("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["public_id", "user__username", "name"]
    list_select_related = ["user"]
    fields = ["public_id", "user", "name", "state", "issued_via", "issued_by", "created_at", "expires_at",
              "last_used_at", "revoked_at", "revoked_by"]
    readonly_fields = fields
    actions = ["revoke"]

    @admin.display(description="state")
    def state(self, token):
        return {"active": "Active", "expired": "Expired", "revoked": "Revoked"}[token_state(token)]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            token_revoke(token=token, by=request.user.get_username())
            count += 1
        messages.success(request, f"Revoked {count} token(s); they stop working at once.")


# --- accounts ---------------------------------------------------------------------------


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class AccountAdmin(UserAdmin):
    """Django's user admin, except that no one sets another user's password here, superusers
    included: that would let them sign in, and approve, as that user. A forgotten password is
    reset from the server's shell (`manage.py changepassword USERNAME`), by an operator."""

    def user_change_password(self, request, id, form_url=""):
        if str(request.user.pk) != str(id):
            raise PermissionDenied("No one sets another user's password in the workbench; "
                                   "a server operator resets it with manage.py changepassword.")
        return super().user_change_password(request, id, form_url)
