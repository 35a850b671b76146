from django import forms
from django.contrib import admin

from skills.models import Skill
from skills.parser import SkillFormatError, parse_skill_md
from skills.services import skill_import


class SkillAdminForm(forms.ModelForm):
    class Meta:
        model = Skill
        fields = ["source", "status"]
        labels = {"source": "SKILL.md"}

    def clean_source(self):
        text = self.cleaned_data["source"]
        try:
            parsed = parse_skill_md(text)
        except SkillFormatError as exc:
            raise forms.ValidationError(str(exc)) from None
        if self.instance.pk and parsed.name != self.instance.name:
            raise forms.ValidationError(f"the name in SKILL.md is {parsed.name!r}; this skill is {self.instance.name!r}")
        return text


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    """Skills are edited as SKILL.md text; the parsed fields are derived and read-only."""

    form = SkillAdminForm
    list_display = ["name", "version", "status", "updated_at"]
    list_filter = ["status"]
    search_fields = ["name", "description"]
    readonly_fields = ["name", "description", "tags", "allowed_tools", "version", "sha256", "updated_by", "updated_at"]

    def save_model(self, request, obj, form, change):
        saved, _ = skill_import(text=form.cleaned_data["source"], user=request.user, status=form.cleaned_data["status"])
        obj.pk = saved.pk
