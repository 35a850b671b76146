from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from agents import sources
from agents.breaker import breaker_state
from agents.model_calls import model_profile_test
from agents.models import (
    Agent, AgentVersion, CrmAccount, CrmTicket, ModelProfile, ModelProfileHealth, SentEmail, Tool, ToolSource,
)
from agents.backends import registered_names
from agents.services import (
    agent_publish, model_profile_check, tool_caps_problems, tool_fixed_check, tool_fixed_fields, tool_update,
)
from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError
from core.permissions import is_governance_admin
from core.approver_roles import StaffedApproverRoleForm
# Registers the trust changes' and the proposals' admins; the forms below propose through it.
from agents.trust_admin import each, mark, propose_loosening
from agents.trust_approval import approval_state, approval_tightened, change_propose, loosening_split, \
    reapproval_proposed


class ToolSourceAdminForm(StaffedApproverRoleForm):
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
    list_display = ["name", "kind", "enabled", "last_synced_at", "last_sync_ok", "tool_count", "last_sync_error"]
    list_filter = ["kind", "enabled", "last_sync_ok"]
    search_fields = ["name", "description", "url", "path"]
    readonly_fields = ["last_synced_at", "last_sync_ok", "last_sync_error_code", "last_sync_error", "created_by",
                       "created_at", "updated_at"]
    actions = ["sync"]

    @admin.display(description="tools")
    def tool_count(self, source):
        return source.tools.count()

    def has_delete_permission(self, request, obj=None):
        # Its tools go with it (cascade), and the next sync brings them back new: disabled, but with the
        # defaults instead of the approval an admin set, which only two governance admins loosen. Runs'
        # snapshots and receipts name it too. A source is retired by disabling it.
        return False

    def get_readonly_fields(self, request, obj=None):
        # The name prefixes its tools' names and the kind decides how they are called: fixed once saved.
        fixed = ["name", "kind"] if obj else []
        # What a run may read untainted is governance admins' call (agents.trust: trusting takes two).
        return self.readonly_fields + fixed + ([] if is_governance_admin(request.user) else ["trusted"])

    def save_model(self, request, obj, form, change):
        values = {f: form.cleaned_data[f] for f in sources.SOURCE_FIELDS if f in form.cleaned_data}
        # The form ran the same checks; the services are still the only writers.
        if change:
            loosening = loosening_split(obj, values)  # changing or clearing its approver role: proposed below
            saved = sources.tool_source_update(source=obj, values=values, user=request.user)
        else:
            loosening = {}
            saved = sources.tool_source_create(values=values | {"name": obj.name, "kind": obj.kind}, user=request.user)
        if "trusted" in form.changed_data:
            mark(self, request, saved, form.cleaned_data["trusted"])
        if loosening:
            propose_loosening(self, request, saved, loosening)
        obj.pk = saved.pk

    @admin.action(description="Sync: discover tools (new ones arrive disabled; changed ones are held)")
    def sync(self, request, queryset):
        for source in queryset:
            try:
                report = sources.tool_source_sync(source=source)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                continue
            if not report["ok"]:
                self.message_user(request, f"{source.name}: {report['error']['message']}", messages.ERROR)
                continue
            counts = ", ".join(f"{len(report[k])} {k}" for k in ("created", "changed", "unchanged", "removed", "rejected"))
            self.message_user(request, f"{source.name}: {counts}",
                              messages.WARNING if report["changed"] or report["removed"] else messages.SUCCESS)


class ToolAdminForm(StaffedApproverRoleForm):
    """The API's rule for what no person may change (agents.services.tool_fixed_check): those fields
    are shown read-only, and a post that would change one anyway is a form error, nothing saved."""

    class Meta:
        model = Tool
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk is not None:
            try:
                tool_fixed_check(Tool.objects.select_related("tool_source").get(pk=self.instance.pk), cleaned)
            except DomainError as exc:
                field = next(iter(exc.details), None)
                self.add_error(field if field in self.fields else None, exc.message)
        return cleaned


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    form = ToolAdminForm
    list_display = ["name", "source", "tool_source", "side_effect", "requires_approval", "enabled", "held"]
    list_filter = ["held", "enabled", "side_effect", "requires_approval", "source", "tool_source"]
    search_fields = ["name", "description"]
    readonly_fields = ["source", "tool_source", "remote_name", "binding", "approved_sha256", "held", "change"]
    exclude = ["pending_change"]
    actions = ["approve_change", "enable", "disable"]

    def get_readonly_fields(self, request, obj=None):
        # A discovered tool's schema and handler come from its source; only a sync or a re-approval changes them.
        # Its trust follows its source's mark; a built-in's is governance admins' call (agents.trust).
        # A built-in's handler is code the server imports and calls: set by the code that installs
        # the tool (load_demo), never typed in here (it is outside WARRANT_PYTHON_TOOL_MODULES).
        # A declared side effect and a discovered tool's description are no person's to change (tool_fixed_fields).
        # A saved tool's name is fixed: policies, skills, caps and golden cases name it, so a renamed tool
        # would slip out from under them (the API renames none).
        fixed = tool_fixed_fields(obj) if obj is not None else []
        if obj is not None and obj.tool_source_id:
            return self.readonly_fields + ["name", "input_schema", "handler", "trusted_output"] + fixed
        return (self.readonly_fields + ["handler"] + (["name"] if obj is not None else []) + fixed
                + ([] if is_governance_admin(request.user) else ["trusted_output"]))

    def has_delete_permission(self, request, obj=None):
        # Deleted and added again (or synced again), a tool would be back without the approval an admin
        # set, a loosening that takes two governance admins. Runs' snapshots and receipts name it too.
        # A tool is retired by disabling it.
        return False

    def save_model(self, request, obj, form, change):
        marked = "trusted_output" in form.changed_data
        if marked:
            obj.trusted_output = form.initial.get("trusted_output", False)  # set below, and recorded
        loosening = {}
        if change:  # lifting requires_approval, changing or clearing the approver role: kept as stored, proposed
            stored = Tool.objects.get(pk=obj.pk)
            loosening = loosening_split(stored, {f: form.cleaned_data[f] for f in ("requires_approval", "approver_role")
                                                 if f in form.cleaned_data})
            if "requires_approval" in loosening:
                obj.requires_approval = stored.requires_approval
            if "approver_role" in loosening:
                obj.approver_role_id = stored.approver_role_id
        super().save_model(request, obj, form, change)
        if change:  # what is left of the approval change tightens it or leaves it: sealed if it tightens
            approval_tightened(obj, approval_state(stored), user=request.user)
        if marked:
            mark(self, request, obj, form.cleaned_data["trusted_output"])
        if loosening:
            propose_loosening(self, request, obj, loosening)

    @admin.display(description="change waiting for approval")
    def change(self, tool):
        diff = sources.tool_change_diff(tool)
        if not diff:
            return "none"
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', diff)

    @admin.action(description="Re-approve: accept the change the source reports (a trusted source's: proposed)")
    def approve_change(self, request, queryset):
        def approve(tool):
            if not reapproval_proposed(tool):
                return sources.tool_change_approve(tool=tool, user=request.user)
            proposal = change_propose(tool=tool, user=request.user, reason="proposed in the admin")
            self.message_user(request, f"{tool.name}: its source is trusted, so re-approving is proposed (proposal "
                                       f"{proposal.pk}); it stays held until another governance admin confirms it.",
                              messages.WARNING)

        each(self, request, queryset.select_related("tool_source"), approve,
             "re-approved (or, for a trusted source's tool, proposed: see above)")

    @admin.action(description="Enable")
    def enable(self, request, queryset):
        for tool in queryset:
            tool_update(tool=tool, values={"enabled": True})

    @admin.action(description="Disable")
    def disable(self, request, queryset):
        for tool in queryset:
            tool_update(tool=tool, values={"enabled": False})


class ModelProfileForm(forms.ModelForm):
    """The admin's form runs the same checks as the API (timeouts, base URL, fallback cycles)."""

    # Not a URLField: Django's URL validator refuses bare host names (http://ollama:11434), the usual
    # form in a private network; model_profile_check applies Warrant's own rule.
    base_url = forms.CharField(required=False, max_length=200, help_text=(
        "The server's root; Warrant appends /v1/chat/completions (openai: a URL already ending in /v1 is taken as "
        "it is) or /v1/messages (anthropic)."))
    # A choice among the registered names, read when the form is built: never a dotted path to import.
    backend = forms.ChoiceField(choices=lambda: [(name, name) for name in registered_names()],
                                help_text="A registered backend (the deployment adds its own by name).")

    class Meta:
        model = ModelProfile
        fields = "__all__"

    def clean_extra_body(self):
        # An emptied box means no extra options, not a null the column cannot hold.
        value = self.cleaned_data.get("extra_body")
        return {} if value in (None, "") else value

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

    def get_readonly_fields(self, request, obj=None):
        # Fallback lists, agent specs and breaker health refer to a profile by name: fixed once saved.
        return self.readonly_fields + (["name"] if obj else [])

    def has_delete_permission(self, request, obj=None):
        # Runs' snapshots and other profiles' fallbacks name it; a profile is retired by editing it.
        return False

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


class AgentAdminForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        if "tool_caps" in cleaned and cleaned["tool_caps"] in (None, ""):
            cleaned["tool_caps"] = {}  # the field left empty: no caps
        if "tool_caps" in cleaned and "tools" in cleaned:  # either missing: its own error is shown already
            tools = [tool.name for tool in cleaned["tools"]]
            if problems := tool_caps_problems(cleaned["tool_caps"], tools):
                self.add_error("tool_caps", problems)
        return cleaned


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ["slug", "name", "model_profile", "published_version"]
    filter_horizontal = ["tools"]
    actions = ["publish"]

    def has_delete_permission(self, request, obj=None):
        # It would leave the scope of every policy naming it (the m2m rows go), a policy change past the
        # gate and the history, and one made again under its slug is no longer in that scope. Runs point
        # at a published one, and the API deletes no agent either.
        return False

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
