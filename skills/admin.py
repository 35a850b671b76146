"""Skills in the workbench: write or upload a SKILL.md (validated by the parser), history and diffs.

A save is skills.services' import by the signed-in admin, so it passes the same golden gate as the API:
an activation with the skill active, a change taking the active version out of force without it. A
failing set leaves the skill as it was and says so; the emergency path is the same two admins (one
states a reason, another ticks the confirmation on the same change). An active skill is not deleted
here: retiring it (its status) is the change the gate sees.
"""

from django import forms
from django.contrib import admin, messages
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError
from core.diffs import text_diff
from skills.models import Skill, SkillVersion
from skills.parser import SkillFormatError, parse_skill_md
from skills.services import EMERGENCY_ASKED, check_skill_transition, skill_import_report

MAX_UPLOAD_BYTES = 256 * 1024


class SkillAdminForm(forms.ModelForm):
    user = None  # the editor, set by SkillAdmin.get_form
    upload = forms.FileField(required=False, label="or upload a SKILL.md file",
                             help_text="Replaces the text above when given.")
    emergency_reason_given = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2, "cols": 100}),
        label="Emergency: reason",
        help_text="Only when the golden set fails with this change (an activation, or taking the active version "
                  "out of force): asks for it with this reason; another governance admin confirms it.")
    emergency_confirm = forms.BooleanField(
        required=False, label="Confirm the emergency asked for",
        help_text="Makes the same change another governance admin asked for past a failing golden set (not the "
                  "one who asked, not the text's author).")

    class Meta:
        model = Skill
        fields = ["source", "status"]
        labels = {"source": "SKILL.md"}
        widgets = {"source": forms.Textarea(attrs={"rows": 26, "cols": 100, "class": "wb-source", "spellcheck": "false"})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].required = False
        # The text as written: stripped, or with a browser's CRLF line ends, unchanged text would read as new text.
        self.fields["source"].strip = False

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
        if not upload and "\r\n" not in (self.instance.source or ""):
            text = data["source"] = text.replace("\r\n", "\n")
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
        if data.get("emergency_reason_given", "").strip() and data.get("emergency_confirm"):
            raise forms.ValidationError({"emergency_confirm": "one admin asks (the reason), another confirms"})
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
        gated = ["emergency_reason_given", "emergency_confirm"] if obj else []
        return ["source", "upload", "status", *gated] + (self.readonly_fields if obj else [])

    @admin.display(description="history")
    def history_link(self, skill):
        return format_html('<a href="{}">versions and diffs</a>', reverse("admin:skills_skill_versions", args=[skill.pk]))

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        try:
            saved, outcome = skill_import_report(text=data["source"], user=request.user, status=data["status"],
                                                 emergency_reason=data.get("emergency_reason_given", ""),
                                                 confirm_emergency=data.get("emergency_confirm", False))
        except DomainError as exc:  # the gate, a request confirmed by the wrong admin, a stale request
            request.warrant_gate_refused = True
            self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)
            return
        obj.pk = saved.pk
        if outcome == EMERGENCY_ASKED:
            request.warrant_gate_refused = True
            self.message_user(request, "Not changed yet: the emergency is asked for; another governance admin "
                                       "confirms it on this page.", messages.WARNING)

    def response_add(self, request, obj, post_url_continue=None):
        if obj.pk is None:  # refused: nothing to open; the message says why
            return redirect("admin:skills_skill_changelist")
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request, obj):
        if getattr(request, "warrant_gate_refused", False):  # not "changed successfully": it was not
            return redirect("admin:skills_skill_change", obj.pk)
        return super().response_change(request, obj)

    def log_change(self, request, obj, message):
        if getattr(request, "warrant_gate_refused", False):  # nothing changed: no "Changed …" entry either
            return None
        return super().log_change(request, obj, message)

    def has_delete_permission(self, request, obj=None):
        # An active skill's row deleted would take its contract out of force past the gate: retire it.
        return super().has_delete_permission(request, obj) and (obj is None or obj.status != Skill.Status.ACTIVE)

    def delete_queryset(self, request, queryset):
        active = sorted(queryset.filter(status=Skill.Status.ACTIVE).values_list("name", flat=True))
        if active:
            self.message_user(request, f"Not deleted, being active: {', '.join(active)}. Retire them (their "
                                       f"status) through the golden gate first.", messages.ERROR)
        super().delete_queryset(request, queryset.exclude(status=Skill.Status.ACTIVE))

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
