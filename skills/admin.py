"""Skills in the workbench: write or upload a SKILL.md (validated by the parser), history and diffs."""

from django import forms
from django.contrib import admin
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError
from core.diffs import text_diff
from skills.models import Skill, SkillVersion
from skills.parser import SkillFormatError, parse_skill_md
from skills.services import check_skill_transition, skill_import

MAX_UPLOAD_BYTES = 256 * 1024


class SkillAdminForm(forms.ModelForm):
    user = None  # the editor, set by SkillAdmin.get_form
    upload = forms.FileField(required=False, label="or upload a SKILL.md file",
                             help_text="Replaces the text above when given.")

    class Meta:
        model = Skill
        fields = ["source", "status"]
        labels = {"source": "SKILL.md"}
        widgets = {"source": forms.Textarea(attrs={"rows": 26, "cols": 100, "class": "wb-source", "spellcheck": "false"})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].required = False

    def clean(self):
        data = super().clean()
        upload = data.get("upload")
        if upload:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError({"upload": f"the file is larger than {MAX_UPLOAD_BYTES // 1024} KiB"})
            try:
                data["source"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError({"upload": "the file is not UTF-8 text"}) from None
        text = data.get("source") or ""
        if not text.strip():
            raise forms.ValidationError({"source": "write the SKILL.md here or upload it"})
        try:
            parsed = parse_skill_md(text)
        except SkillFormatError as exc:
            raise forms.ValidationError({"upload" if upload else "source": str(exc)}) from None
        if self.instance.pk and parsed.name != self.instance.name:
            raise forms.ValidationError({"source": f"the name in SKILL.md is {parsed.name!r}; this skill is {self.instance.name!r}"})
        if not self.instance.pk and Skill.objects.filter(name=parsed.name).exists():
            raise forms.ValidationError({"source": f"a skill named {parsed.name!r} exists already; change that one"})
        text_changed = not self.instance.pk or parsed.sha256 != self.instance.sha256
        if text_changed and self.instance.pk and data.get("status") == self.instance.status:
            data["status"] = Skill.Status.DRAFT  # new text goes back to review; the status was left as it was
        self._check_lifecycle(parsed, data.get("status"))
        return data

    def _check_lifecycle(self, parsed, status) -> None:
        """Refuse here, next to the field, what skill_import would refuse on save: new text is a
        draft by its author, who may not approve it; the lifecycle allows only some moves."""
        if not status:
            return
        if self.instance.pk and parsed.sha256 == self.instance.sha256:
            skill = self.instance
        else:
            skill = Skill(name=parsed.name, status=Skill.Status.DRAFT, author=self.user)
        try:
            check_skill_transition(skill=skill, to=status, user=self.user)
        except DomainError as exc:
            raise forms.ValidationError({"status": exc.message}) from None


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    """Skills are edited as SKILL.md text; the parsed fields are derived and read-only."""

    form = SkillAdminForm
    list_display = ["name", "version", "status", "updated_by", "updated_at", "history_link"]
    list_filter = ["status"]
    search_fields = ["name", "description"]
    readonly_fields = ["name", "description", "tags", "allowed_tools", "version", "sha256", "updated_by", "updated_at"]
    change_form_template = "admin/skills/skill/change_form.html"

    def get_fields(self, request, obj=None):
        return ["source", "upload", "status"] + (self.readonly_fields if obj else [])

    @admin.display(description="history")
    def history_link(self, skill):
        return format_html('<a href="{}">versions and diffs</a>', reverse("admin:skills_skill_versions", args=[skill.pk]))

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def save_model(self, request, obj, form, change):
        saved, _ = skill_import(text=form.cleaned_data["source"], user=request.user, status=form.cleaned_data["status"])
        obj.pk = saved.pk

    def get_urls(self):
        return [path("<int:skill_id>/versions/", self.admin_site.admin_view(self.versions_view), name="skills_skill_versions")] \
            + super().get_urls()

    def versions_view(self, request, skill_id):
        if not self.has_view_permission(request):
            return redirect("admin:index")
        skill = get_object_or_404(Skill, pk=skill_id)
        entries = list(SkillVersion.objects.filter(skill=skill).select_related("changed_by").order_by("-changed_at", "-id"))
        versions = []
        for index, entry in enumerate(entries):
            before = entries[index + 1] if index + 1 < len(entries) else None
            versions.append({"entry": entry, "before": before,
                             "lines": text_diff(before.source, entry.source) if before else None,
                             "status_changed": before is not None and before.status != entry.status})
        context = {**self.admin_site.each_context(request), "opts": self.opts, "original": skill,
                   "title": f"History of {skill.name}", "versions": versions}
        return TemplateResponse(request, "admin/skills/skill/versions.html", context)


@admin.register(SkillVersion)
class SkillVersionAdmin(ReadOnlyAdmin):
    list_display = ["skill_name", "version", "status", "changed_by", "changed_at"]
    list_filter = ["status"]
