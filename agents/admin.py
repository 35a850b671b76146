from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html

from agents import sources
from agents.models import Agent, AgentVersion, CrmAccount, CrmTicket, ModelProfile, SentEmail, Tool, ToolSource
from agents.services import agent_publish, tool_update
from governance.api_errors import DomainError


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ToolSourceAdminForm(forms.ModelForm):
    class Meta:
        model = ToolSource
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        candidate = ToolSource(name=cleaned.get("name") or self.instance.name, kind=cleaned.get("kind") or self.instance.kind)
        for field in sources.SOURCE_FIELDS:
            if field in cleaned:
                setattr(candidate, field, cleaned[field])
        try:
            sources.tool_source_check(candidate)
        except ValidationError as exc:
            for field, problems in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, problems)
        return cleaned


@admin.register(ToolSource)
class ToolSourceAdmin(admin.ModelAdmin):
    """Register MCP servers, OpenAPI services and Python modules; sync discovers their tools."""

    form = ToolSourceAdminForm
    list_display = ["name", "kind", "enabled", "last_synced_at", "tool_count", "last_sync_error"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "description", "url", "path"]
    readonly_fields = ["last_synced_at", "last_sync_error", "created_by", "created_at", "updated_at"]
    actions = ["sync"]

    @admin.display(description="tools")
    def tool_count(self, source):
        return source.tools.count()

    def get_readonly_fields(self, request, obj=None):
        # The name prefixes its tools' names and the kind decides how they are called: fixed once saved.
        return self.readonly_fields + (["name", "kind"] if obj else [])

    def save_model(self, request, obj, form, change):
        values = {f: form.cleaned_data[f] for f in sources.SOURCE_FIELDS if f in form.cleaned_data}
        # The form ran the same checks; the services are still the only writers.
        if change:
            saved = sources.tool_source_update(source=obj, values=values)
        else:
            saved = sources.tool_source_create(values=values | {"name": obj.name, "kind": obj.kind}, user=request.user)
        obj.pk = saved.pk

    @admin.action(description="Sync: discover tools (new ones arrive disabled; changed ones are held)")
    def sync(self, request, queryset):
        for source in queryset:
            try:
                report = sources.tool_source_sync(source=source)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            self.message_user(request, f"{source.name}: " + ", ".join(f"{len(v)} {k}" for k, v in report.items()),
                              messages.WARNING if report["changed"] or report["removed"] else messages.SUCCESS)


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ["name", "source", "tool_source", "side_effect", "requires_approval", "enabled", "held"]
    list_filter = ["held", "enabled", "side_effect", "requires_approval", "source", "tool_source"]
    search_fields = ["name", "description"]
    readonly_fields = ["source", "tool_source", "remote_name", "binding", "approved_sha256", "held", "change"]
    exclude = ["pending_change"]
    actions = ["approve_change", "enable", "disable"]

    def get_readonly_fields(self, request, obj=None):
        # A discovered tool's schema and handler come from its source; only a sync or a re-approval changes them.
        if obj is not None and obj.tool_source_id:
            return self.readonly_fields + ["name", "input_schema", "handler"]
        return self.readonly_fields

    @admin.display(description="change waiting for approval")
    def change(self, tool):
        diff = sources.tool_change_diff(tool)
        if not diff:
            return "none"
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', diff)

    @admin.action(description="Re-approve: accept the change the source reports")
    def approve_change(self, request, queryset):
        for tool in queryset:
            try:
                sources.tool_change_approve(tool=tool, user=request.user)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            self.message_user(request, f"{tool.name}: change approved")

    @admin.action(description="Enable")
    def enable(self, request, queryset):
        for tool in queryset:
            tool_update(tool=tool, values={"enabled": True})

    @admin.action(description="Disable")
    def disable(self, request, queryset):
        for tool in queryset:
            tool_update(tool=tool, values={"enabled": False})


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "backend", "model", "base_url"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "model_profile", "published_version"]
    filter_horizontal = ["tools"]
    actions = ["publish"]

    @admin.display(description="published version")
    def published_version(self, agent):
        version = agent.current_version
        return f"v{version.version}" if version else "not published"

    @admin.action(description="Publish the draft as a new version")
    def publish(self, request, queryset):
        for agent in queryset:
            version, created = agent_publish(agent=agent, user=request.user)
            self.message_user(request, f"{agent.slug}: {'published' if created else 'unchanged at'} v{version.version}")


@admin.register(AgentVersion)
class AgentVersionAdmin(ReadOnlyAdmin):
    list_display = ["agent", "version", "sha256", "published_by", "published_at"]


@admin.register(CrmAccount)
class CrmAccountAdmin(admin.ModelAdmin):
    list_display = ["account_id", "name", "plan", "arr", "renewal_date", "nps", "owner"]


@admin.register(CrmTicket)
class CrmTicketAdmin(admin.ModelAdmin):
    list_display = ["ticket_id", "account", "priority", "title", "status"]
    list_filter = ["status", "priority"]


@admin.register(SentEmail)
class SentEmailAdmin(ReadOnlyAdmin):
    list_display = ["to", "subject", "sent_at"]
