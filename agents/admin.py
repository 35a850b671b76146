from django.contrib import admin

from agents.models import Agent, AgentVersion, CrmAccount, CrmTicket, ModelProfile, SentEmail, Tool
from agents.services import agent_publish


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ["name", "side_effect", "enabled", "source"]
    list_filter = ["side_effect", "enabled", "source"]
    search_fields = ["name", "description"]


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
