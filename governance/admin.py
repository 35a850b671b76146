from django.contrib import admin

from governance import services
from governance.models import Policy, PolicyVersion, ToolGrant


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
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
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ["policy_name", "version", "action", "changed_by", "changed_at"]
    list_filter = ["action"]
    readonly_fields = [f.name for f in PolicyVersion._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ToolGrant)
class ToolGrantAdmin(admin.ModelAdmin):
    list_display = ["role", "tool", "granted_by", "granted_at"]
    list_filter = ["role"]
