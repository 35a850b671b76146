"""The workbench's policies: edit, enable, scope, history with diffs, and the policy lab.

Writes go through governance.drafts (each a draft put in force through its gate), the dry run
through governance.evaluation: the admin decides nothing the API would decide differently.
"""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from agents.models import Agent
from core.admin import ReadOnlyAdmin
from core.approver_roles import unstaffed_problem
from core.parsers import loads_bounded
from core.permissions import is_governance_admin
from governance import drafts, engine
from core.diffs import values_diff
from governance.evaluation import MAX_EVALUATE_INPUT_CHARS, hidden_tools, policy_evaluate
from governance.models import Policy, PolicyVersion
from governance.roles import describe, unstaffed_approver_roles
from governance.selectors import policy_spec, routing_staff_problems


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
        if "quorum" in self.fields:  # left empty: one approver, as before quorums existed
            self.fields["quorum"].required = False
        if self.instance.pk:
            self.fields["expected_version"].required = True
            self.fields["expected_version"].initial = self.instance.version

    def clean_quorum(self):
        quorum = self.cleaned_data.get("quorum")
        return 1 if quorum is None else quorum

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
        problems = engine.validate(policy_spec(candidate, agent_slugs=[a.slug for a in data.get("agents") or []]),
                                   default_ttl_seconds=settings.WARRANT["DEFAULT_APPROVAL_TTL_SECONDS"])
        for problem in problems:
            field = next((f for f in ("regex", "approver_role", "target_tools", "keywords", "content", "response",
                                      "quorum", "escalate_after_seconds") if f.split("_")[0] in problem), None)
            self.add_error(field, problem)
        if data.get("enabled") and (unstaffed := unstaffed_problem(data.get("approver_role"))):
            self.add_error("approver_role", unstaffed)
        if data.get("enabled") and not problems:
            for field, messages_ in routing_staff_problems(candidate).items():
                for message in messages_:
                    self.add_error(field, message)
        return data



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
        ("Who approves (tool approvals)", {"fields": ["quorum", "escalate_to_role", "escalate_after_seconds"]}),
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
        # Every change is a draft put in force through its gate (governance.drafts), which writes the
        # history row; a failing golden set leaves the policy as it was, and the draft says why.
        values = {name: form.cleaned_data[name] for name in form.cleaned_data if name not in ("agents", "expected_version")}
        values["agents"] = list(form.cleaned_data.get("agents", []))
        current = Policy.objects.get(pk=obj.pk) if change else None
        saved = self._gated(request, policy=current, values=values)
        if saved is not None:
            obj.pk, obj.version = saved.pk, saved.version
        elif current is not None:
            obj.refresh_from_db()

    def response_add(self, request, obj, post_url_continue=None):
        if obj.pk is None:  # refused by its gate: nothing to open; the message links the draft
            return redirect("admin:governance_policy_changelist")
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request, obj):
        if getattr(request, "warrant_gate_refused", False):  # not "changed successfully": it was not
            return redirect("admin:governance_policy_change", obj.pk)
        return super().response_change(request, obj)

    def _gated(self, request, **change) -> Policy | None:
        """The change through its gate: the policy in force after it, or None (refused, said in a message)."""
        try:
            return drafts.propose_and_activate(user=request.user, **change)[1]
        except drafts.GateFailed as exc:
            request.warrant_gate_refused = True
            link = reverse("admin:governance_policydraft_change", args=[exc.details["draft"]])
            self.message_user(request, format_html(
                'Not in force: {} <a href="{}">The draft and its cases before and after.</a>', exc.message, link),
                messages.ERROR)
            return None

    def save_related(self, request, form, formsets, change):
        pass  # agents were set by the service

    def delete_model(self, request, obj):
        self._gated(request, policy=obj, delete=True)

    def delete_queryset(self, request, queryset):
        for policy in queryset:
            self._gated(request, policy=policy, delete=True)

    def _set_enabled(self, request, queryset, enabled: bool) -> None:
        changed = 0
        for policy in queryset:
            if policy.enabled != enabled:
                try:
                    if self._gated(request, policy=policy, values={"enabled": enabled}) is None:
                        continue
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
            rows.append(approval | {"effect": f"parks {tool['name']} for {approval['approver_role']}{_routing(approval)}"})
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


def _routing(approval: dict) -> str:
    """', 2 approvals, escalates to secops-leads after 600 s' when the policy asks for either."""
    parts = [f"{approval['quorum']} approvals"] if approval.get("quorum", 1) > 1 else []
    if approval.get("escalate_to_role"):
        parts.append(f"escalates to {approval['escalate_to_role']} after {approval['escalate_after_seconds']} s")
    return "".join(f", {part}" for part in parts)
