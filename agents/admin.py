from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from agents.breaker import breaker_state
from agents.model_calls import model_profile_test
from agents.models import Agent, AgentVersion, CrmAccount, CrmTicket, ModelProfile, ModelProfileHealth, SentEmail, Tool
from agents.services import agent_publish, model_profile_check


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


class ModelProfileForm(forms.ModelForm):
    """The admin's form runs the same checks as the API (timeouts, base URL, fallback cycles)."""

    base_url = forms.URLField(required=False, assume_scheme="http", help_text="The server's root, without /v1.")

    class Meta:
        model = ModelProfile
        fields = "__all__"

    def _post_clean(self):
        super()._post_clean()
        try:
            model_profile_check(self.instance)
        except ValidationError as exc:
            self._update_errors(exc)


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    form = ModelProfileForm
    list_display = ["name", "backend", "model", "base_url", "breaker", "last_success", "last_error", "test_button"]
    readonly_fields = ["health"]
    actions = ["test_profiles"]

    def get_urls(self):
        test = path("<path:object_id>/test/", self.admin_site.admin_view(self.test_view),
                    name="agents_modelprofile_test")
        return [test] + super().get_urls()

    def _health(self, profile) -> ModelProfileHealth | None:
        return ModelProfileHealth.objects.filter(profile_name=profile.name).first()

    @admin.display(description="breaker")
    def breaker(self, profile):
        return breaker_state(self._health(profile))

    @admin.display(description="last success")
    def last_success(self, profile):
        health = self._health(profile)
        return health.last_success_at if health and health.last_success_at else "-"

    @admin.display(description="last error")
    def last_error(self, profile):
        health = self._health(profile)
        return f"{health.last_error_at:%Y-%m-%d %H:%M:%S} {health.last_error}" if health and health.last_error_at else "-"

    @admin.display(description="test")
    def test_button(self, profile):
        # A submit button of the page's own form (it carries the CSRF token), posted elsewhere:
        # one click, and no form nested in the changelist's form.
        url = reverse("admin:agents_modelprofile_test", args=[profile.pk])
        return format_html('<button type="submit" formaction="{}" formmethod="post" class="button">Test</button>', url)

    @admin.display(description="health")
    def health(self, profile):
        if profile.pk is None:
            return "-"
        health = self._health(profile)
        state = breaker_state(health)
        last_ok = health.last_success_at if health and health.last_success_at else "never"
        error = f"{health.last_error_at:%Y-%m-%d %H:%M:%S}: {health.last_error}" if health and health.last_error_at else "none"
        return format_html("breaker {} · last success {} · last error {} &nbsp; {}", state, last_ok, error,
                           self.test_button(profile))

    def test_view(self, request, object_id):
        profile = self.get_object(request, object_id)
        if profile is None:
            raise Http404("no such model profile")
        if request.method != "POST" or not self.has_change_permission(request, profile):
            raise PermissionDenied
        self._report(request, model_profile_test(profile=profile))
        back = request.META.get("HTTP_REFERER", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            back = reverse("admin:agents_modelprofile_changelist")
        return HttpResponseRedirect(back)

    @admin.action(description="Test the selected profiles (one call each, no retries)")
    def test_profiles(self, request, queryset):
        for profile in queryset:
            self._report(request, model_profile_test(profile=profile))

    def _report(self, request, result: dict) -> None:
        if result["ok"]:
            self.message_user(request, f"{result['profile']}: answered in {result['latency_ms']} ms by "
                                       f"{result['model']} ({result['reply'][:60]!r})", messages.SUCCESS)
        else:
            self.message_user(request, f"{result['profile']}: failed: {result['error']} (breaker {result['breaker']})",
                              messages.ERROR)


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
