"""Triggers in the workbench: each with its last run and success rate, its recent fires, and
pause, resume and rotate-secret actions for governance admins (compliance reads them).

Saving goes through triggers.services, so the admin checks and does what the API does (the
template compiles, the schedule is valid, the periodic task follows, the secret is shown once).
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError
from core.permissions import is_governance_admin, reads_everything
from triggers import selectors, services
from triggers.models import ServiceAccount, Trigger, TriggerFire

RECENT_SHOWN = 20


class _GovernanceAdminReads:
    """Governance admins and compliance read these; nobody else sees them."""

    def has_view_permission(self, request, obj=None):
        return is_governance_admin(request.user) or reads_everything(request.user)

    def has_module_permission(self, request):
        return self.has_view_permission(request)


class _GovernanceAdminWrites(_GovernanceAdminReads):
    """And governance admins change them."""

    def has_add_permission(self, request):
        return is_governance_admin(request.user)

    def has_change_permission(self, request, obj=None):
        return is_governance_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        # Paused or disabled, never deleted (the API deletes neither): a trigger's fires, the refused
        # ones and the deliveries it accepted once included, are the record of what came in and what it
        # started, and a service account is named by the runs it started.
        return False


class TriggerForm(forms.ModelForm):
    class Meta:
        model = Trigger
        fields = ["name", "description", "kind", "agent", "input_template", "service_account", "concurrency", "cron",
                  "interval_seconds", "timezone", "missed", "payload_schema", "max_payload_bytes",
                  "replay_window_seconds"]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        candidate = Trigger(**{k: v for k, v in data.items() if k in self.Meta.fields})
        for field, problems in (services.trigger_problem(candidate) or {}).items():
            self.add_error(field if field in self.fields else None, problems)
        return data


@admin.register(Trigger)
class TriggerAdmin(_GovernanceAdminWrites, admin.ModelAdmin):
    form = TriggerForm
    list_display = ["name", "kind", "agent", "service_account", "enabled", "schedule", "last_run", "success_rate",
                    "last_fire_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "description"]
    readonly_fields = ["enabled", "paused_by", "paused_at", "last_fire_at", "secret_rotated_at", "hook_url",
                       "recent_fires"]
    actions = ["pause", "resume", "rotate_secret"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent", "service_account__user")

    def get_fields(self, request, obj=None):
        return [*TriggerForm.Meta.fields, *(self.readonly_fields if obj else [])]

    @admin.display(description="schedule")
    def schedule(self, trigger):
        if trigger.kind != Trigger.Kind.SCHEDULE:
            return "-"
        return f"{trigger.cron} ({trigger.timezone})" if trigger.cron else f"every {trigger.interval_seconds} s"

    @admin.display(description="last run")
    def last_run(self, trigger):
        last = selectors.stats_of(trigger)["last_run"]
        return last["status"] if last else "-"

    @admin.display(description="success rate")
    def success_rate(self, trigger):
        stats = selectors.stats_of(trigger)
        if stats["success_rate"] is None:
            return "-"
        return f"{stats['success_rate']:.0%} of {stats['ended']}"

    @admin.display(description="hook URL")
    def hook_url(self, trigger):
        return f"/api/v1/hooks/{trigger.name}/" if trigger.kind == Trigger.Kind.WEBHOOK else "-"

    @admin.display(description="recent fires")
    def recent_fires(self, trigger):
        fires = (TriggerFire.objects.filter(trigger=trigger).select_related("run")
                 .order_by("-received_at")[:RECENT_SHOWN])
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((f.received_at.strftime("%Y-%m-%d %H:%M:%S"), f.outcome, f.reason or "-", f.delivery_id or "-",
              format_html('<a href="{}">{}</a> {}', reverse("admin:runs_run_change", args=[f.run_id]),
                          str(f.run_id)[:8], f.run.status) if f.run_id else "-") for f in fires))
        return format_html("<table><tr><th>received</th><th>outcome</th><th>reason</th><th>delivery</th>"
                           "<th>run</th></tr>{}</table>", rows) if fires else "none yet"

    def save_model(self, request, obj, form, change):
        data = {k: form.cleaned_data[k] for k in TriggerForm.Meta.fields if k in form.cleaned_data}
        try:
            if change:
                services.trigger_update(obj, by=request.user, **{k: v for k, v in data.items() if k not in ("name", "kind")})
            else:
                trigger, secret = services.trigger_create(by=request.user, **data)
                obj.pk = trigger.pk
                if secret:
                    messages.warning(request, f"The webhook secret of {trigger.name}, shown this once: {secret}")
        except DomainError as exc:
            messages.error(request, exc.message)

    @admin.action(description="Pause the selected triggers")
    def pause(self, request, queryset):
        if not is_governance_admin(request.user):
            return messages.error(request, "Only governance admins may pause a trigger.")
        for trigger in queryset:
            services.trigger_pause(trigger, by=request.user)
        messages.success(request, f"Paused {queryset.count()} triggers: their fires are recorded, no run starts.")

    @admin.action(description="Resume the selected triggers")
    def resume(self, request, queryset):
        if not is_governance_admin(request.user):
            return messages.error(request, "Only governance admins may resume a trigger.")
        for trigger in queryset:
            services.trigger_resume(trigger, by=request.user)
        messages.success(request, f"Resumed {queryset.count()} triggers.")

    @admin.action(description="Rotate the webhook secret (shown once)")
    def rotate_secret(self, request, queryset):
        if not is_governance_admin(request.user):
            return messages.error(request, "Only governance admins may rotate a secret.")
        for trigger in queryset.filter(kind=Trigger.Kind.WEBHOOK):
            secret = services.trigger_rotate_secret(trigger, by=request.user)
            messages.warning(request, f"The new secret of {trigger.name}, shown this once: {secret}")


class ServiceAccountForm(forms.ModelForm):
    username = forms.SlugField(max_length=150)
    roles = forms.ModelMultipleChoiceField(queryset=Group.objects.order_by("name"), required=False)

    class Meta:
        model = ServiceAccount
        fields = ["description"]


@admin.register(ServiceAccount)
class ServiceAccountAdmin(_GovernanceAdminWrites, admin.ModelAdmin):
    list_display = ["user", "active", "roles", "description", "created_by", "created_at", "disabled_at"]
    actions = ["disable", "enable"]

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ServiceAccountForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ["username", "roles", "description"] if obj is None else ["user", "description"]

    def get_readonly_fields(self, request, obj=None):
        return ["user"] if obj else []

    @admin.display(description="active", boolean=True)
    def active(self, account):
        return account.user.is_active

    def _set_active(self, request, queryset, active: bool):
        if not is_governance_admin(request.user):
            return messages.error(request, "Only governance admins may disable or enable a service account.")
        for account in queryset:
            services.service_account_set_active(account, active=active, by=request.user)
        return True

    @admin.action(description="Disable the selected service accounts (their triggers' fires are refused)")
    def disable(self, request, queryset):
        if self._set_active(request, queryset, False):
            messages.success(request, f"Disabled {queryset.count()} service accounts: their triggers start nothing.")

    @admin.action(description="Enable the selected service accounts again")
    def enable(self, request, queryset):
        if self._set_active(request, queryset, True):
            messages.success(request, f"Enabled {queryset.count()} service accounts.")

    @admin.display(description="roles")
    def roles(self, account):
        return ", ".join(account.user.groups.order_by("name").values_list("name", flat=True)) or "-"

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        try:
            account = services.service_account_create(
                username=form.cleaned_data["username"], roles=[g.name for g in form.cleaned_data["roles"]],
                description=form.cleaned_data.get("description", ""), by=request.user)
            obj.pk, obj.user_id = account.pk, account.user_id
        except DomainError as exc:
            messages.error(request, exc.message)


@admin.register(TriggerFire)
class TriggerFireAdmin(_GovernanceAdminReads, ReadOnlyAdmin):
    """The fire history: read, never written here."""

    list_display = ["received_at", "trigger", "kind", "outcome", "reason", "delivery_id", "run"]
    list_filter = ["outcome", "kind", "trigger"]
    search_fields = ["delivery_id", "reason"]
