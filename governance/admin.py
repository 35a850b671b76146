from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from agents.admin import ReadOnlyAdmin
from governance import engine, services
from governance.models import Policy, PolicyVersion, Role, ToolGrant
from governance.selectors import policy_spec


class PolicyAdminForm(forms.ModelForm):
    class Meta:
        model = Policy
        fields = "__all__"

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        # The same checks the engine applies at run time, so a policy that would fail closed never saves.
        candidate = Policy(**{k: v for k, v in data.items() if k != "agents"})
        candidate.pk = self.instance.pk
        problems = engine.validate(policy_spec(candidate, agent_slugs=[a.slug for a in data.get("agents") or []]))
        if problems:
            raise ValidationError(problems)
        return data


class ToolGrantInline(admin.TabularInline):
    model = ToolGrant
    fk_name = "role"
    fields = ["tool", "granted_by", "granted_at"]
    readonly_fields = ["granted_by", "granted_at"]
    extra = 0


@admin.register(Role)
class RoleAdmin(admin.ModelAdmin):
    """Per role: which tools it may use (grants) and which policies it approves for."""

    list_display = ["name", "tools", "approves"]
    inlines = [ToolGrantInline]
    fields = ["name"]

    @admin.display(description="may use")
    def tools(self, role):
        return ", ".join(role.tool_grants.values_list("tool__name", flat=True)) or "-"

    @admin.display(description="approves calls for")
    def approves(self, role):
        return ", ".join(role.approval_policies.values_list("name", flat=True)) or "-"


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    form = PolicyAdminForm
    list_display = ["name", "type", "enabled", "priority", "version", "updated_at"]
    list_filter = ["type", "enabled"]
    search_fields = ["name", "description", "content"]
    filter_horizontal = ["agents"]
    readonly_fields = ["version", "created_at", "updated_at"]

    def save_model(self, request, obj, form, change):
        # Every change goes through the service so that it writes a history row.
        values = {name: form.cleaned_data[name] for name in form.cleaned_data if name != "agents"}
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


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["policy_name", "version", "action", "changed_by", "changed_at"]
    list_filter = ["action"]
    readonly_fields = [f.name for f in PolicyVersion._meta.fields]


@admin.register(ToolGrant)
class ToolGrantAdmin(admin.ModelAdmin):
    list_display = ["role", "tool", "granted_by", "granted_at"]
    list_filter = ["role"]
