from django.contrib import admin

from skills.models import Skill


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "status", "updated_at"]
    list_filter = ["status"]
    search_fields = ["name", "description"]
    readonly_fields = ["version", "sha256", "created_at", "updated_at"]
