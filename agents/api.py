"""The agents API: drafts and their published versions, model profiles, the tool registry.

Thin views over agents.services. Reads are for anyone with a role; writes for governance admins.
Inputs name every writable field: anything else in a body is refused, never silently dropped.
"""


import jsonschema
from django.db import transaction
from django.db.models import Max
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import services
from agents.model_calls import model_profile_test as services_model_profile_test
from agents.models import Agent, AgentVersion, ModelProfile, Tool
from agents.sources import tool_change_diff
from agents.trust import tool_trust
from core.api_fields import StrictSerializer, UniqueListField
from core.api_views import PaginatedList
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin
from governance.roles import StaffedRoleField


@extend_schema_field({"type": "number", "format": "double", "minimum": 0, "exclusiveMinimum": True,
                     "maximum": services.MAX_TIMEOUT_SECONDS})
class TimeoutField(serializers.FloatField):
    """Seconds: more than 0 and at most 600."""

    def __init__(self, **kwargs):
        super().__init__(validators=[services.timeout_validator], **kwargs)


# --- agents ------------------------------------------------------------------------------


def _agents():
    return (Agent.objects.select_related("model_profile").prefetch_related("tools")
            .annotate(current_version_number=Max("versions__version")))


class AgentOutputSerializer(serializers.ModelSerializer):
    """The editable draft, with the number of the version new runs use."""

    model_profile = serializers.SlugRelatedField(slug_field="name", read_only=True)
    tools = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    current_version = serializers.IntegerField(
        source="current_version_number", allow_null=True, read_only=True,
        help_text="The latest published version (what new runs use); null until the first publish.",
    )

    class Meta:
        model = Agent
        ref_name = "Agent"
        fields = [
            "slug", "name", "description", "instructions", "model_profile", "tools", "output_schema", "max_turns",
            "max_tool_calls", "max_tokens", "deadline_seconds", "current_version", "created_at", "updated_at",
        ]


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class JsonSchemaField(serializers.JSONField):
    """A JSON Schema document: an object, or null for none."""


def _check_json_schema(value):
    if value is None:
        return value
    if not isinstance(value, dict):
        raise serializers.ValidationError("Must be a JSON Schema object, or null.")
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as exc:
        raise serializers.ValidationError(f"Not a valid JSON Schema: {exc.message}") from None
    return value


class _AgentFields(StrictSerializer):
    """The draft's writable fields; tools and model profile by name."""

    name = serializers.CharField(max_length=128)
    description = serializers.CharField(allow_blank=True, required=False)
    instructions = serializers.CharField(trim_whitespace=False)
    model_profile = serializers.SlugField(max_length=64, help_text="Name of an existing model profile.")
    tools = serializers.ListField(
        child=serializers.SlugField(max_length=64), max_length=200, required=False, help_text="Tool names."
    )
    output_schema = JsonSchemaField(allow_null=True, required=False, validators=[_check_json_schema])
    # Upper bounds keep budgets meaningful and inside every database's integer range (and
    # `timedelta`'s: an unbounded deadline overflowed when a run started).
    max_turns = serializers.IntegerField(min_value=1, max_value=1_000, required=False)
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=10_000, required=False)
    max_tokens = serializers.IntegerField(min_value=1, max_value=100_000_000, required=False)
    deadline_seconds = serializers.IntegerField(min_value=1, max_value=30 * 24 * 3600, required=False)


class AgentVersionOutputSerializer(serializers.ModelSerializer):
    """A published, immutable snapshot of an agent: what a run points at."""

    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    published_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = AgentVersion
        ref_name = "AgentVersion"
        fields = ["agent", "version", "spec", "sha256", "published_by", "published_at"]


class AgentListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = AgentOutputSerializer
    queryset = Agent.objects.all()

    class InputSerializer(_AgentFields):
        """A new draft: the draft's fields plus its slug, fixed from then on."""

        slug = serializers.SlugField(max_length=64)

        class Meta:
            ref_name = "AgentCreate"

    def get_queryset(self):
        return _agents()

    @extend_schema(
        operation_id="agents_list",
        description="Agents (their drafts), by slug.",
        responses=AgentOutputSerializer(many=True),
    )
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="agents_create",
        description="Create a draft; nothing runs it until it is published.",
        request=InputSerializer,
        responses={201: AgentOutputSerializer},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent = services.agent_create(values=serializer.validated_data)
        return Response(self.get_serializer(_agents().get(pk=agent.pk)).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(GenericAPIView):
    # No DELETE (405): runs point at agents and their versions, so agents are never deleted.
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = AgentOutputSerializer
    queryset = Agent.objects.all()
    lookup_field = "slug"

    class InputSerializer(_AgentFields):
        """Changes to the draft; the slug is fixed."""

        class Meta:
            ref_name = "AgentUpdate"

    def get_queryset(self):
        return _agents()

    @extend_schema(
        operation_id="agents_retrieve",
        description="The draft and the number of the version new runs use.",
        responses=AgentOutputSerializer,
    )
    def get(self, request, slug):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        operation_id="agents_partial_update",
        description="Edit the draft; tools and model profile by name. Published versions never change.",
        request=InputSerializer,
        responses=AgentOutputSerializer,
    )
    def patch(self, request, slug):
        agent = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        agent = services.agent_update(agent=agent, values=serializer.validated_data)
        return Response(self.get_serializer(_agents().get(pk=agent.pk)).data)


class AgentPublishApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = AgentVersionOutputSerializer
    queryset = Agent.objects.all()
    lookup_field = "slug"

    class InputSerializer(StrictSerializer):
        """Publishing takes no fields: the draft is what gets frozen."""

        class Meta:
            ref_name = "AgentPublish"

    @extend_schema(
        operation_id="agents_publish", request=None,
        responses={201: AgentVersionOutputSerializer, 200: AgentVersionOutputSerializer},
        description="Freeze the draft as a new immutable version (201); when the draft has not changed "
                    "since the last publish, the current version is returned (200).",
    )
    def post(self, request, slug):
        agent = self.get_object()
        self.InputSerializer(data=request.data).is_valid(raise_exception=True)
        version, created = services.agent_publish(agent=agent, user=request.user)
        return Response(self.get_serializer(version).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _versions():
    return AgentVersion.objects.select_related("agent", "published_by").order_by("-version")


class AgentVersionListApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = AgentVersionOutputSerializer
    queryset = AgentVersion.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AgentVersion.objects.none()
        agent = get_object_or_404(Agent, slug=self.kwargs["slug"])
        return _versions().filter(agent=agent)

    @extend_schema(
        operation_id="agents_versions_list",
        description="Published versions, newest first.",
        responses=AgentVersionOutputSerializer(many=True),
    )
    def get(self, request, slug):
        return self.list_response()


class AgentVersionDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = AgentVersionOutputSerializer
    queryset = AgentVersion.objects.all()
    lookup_field = "version"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AgentVersion.objects.none()
        return _versions().filter(agent__slug=self.kwargs["slug"])

    @extend_schema(
        operation_id="agents_versions_retrieve",
        description="One published version: its frozen spec and digest.",
        responses=AgentVersionOutputSerializer,
    )
    def get(self, request, slug, version):
        return Response(self.get_serializer(self.get_object()).data)


# --- model profiles ----------------------------------------------------------------------


class ModelProfileOutputSerializer(serializers.ModelSerializer):
    """How a model is reached. There is no key field: only the name of the variable that holds it."""

    class Meta:
        model = ModelProfile
        ref_name = "ModelProfile"
        fields = [
            "name", "backend", "base_url", "model", "api_key_env", "connect_timeout", "read_timeout", "max_retries",
            "fallbacks",
        ]


_SECRET_HINT = "Secrets are never stored or accepted: set api_key_env to the name of the environment variable."


class _ModelProfileFields(StrictSerializer):
    """A profile's writable fields. There is no key field: a body with one is refused."""

    hints = {"api_key": _SECRET_HINT, "key": _SECRET_HINT, "secret": _SECRET_HINT}

    backend = serializers.CharField(max_length=255, help_text=(
        "The name of a registered backend: scripted, openai, anthropic, or one the deployment registers "
        "(WARRANT_MODEL_BACKENDS, warrant.backends entry points). Never a dotted path: an unregistered name is "
        "refused (400, saying why) and nothing is imported."))
    base_url = serializers.RegexField(services.HTTP_URL_PATTERN, max_length=200, allow_blank=True, required=False,
                                      help_text="http(s) URL of the model server; empty for none.")
    model = serializers.CharField(max_length=128)
    api_key_env = serializers.CharField(
        max_length=128, allow_blank=True, required=False, validators=[services.KeyEnvNameValidator()],
        help_text="Name of the environment variable holding the key (e.g. OPENAI_API_KEY), never the key: one the "
                  "deployment allows (WARRANT_SECRET_ENV_ALLOWED), never one of the platform's own (DJANGO_…, "
                  "DATABASE…, WARRANT_…, HOME, AWS_…).",
    )
    connect_timeout = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
    read_timeout = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
    max_retries = serializers.IntegerField(min_value=0, max_value=10, required=False)
    fallbacks = UniqueListField(
        child=serializers.SlugField(max_length=64), max_length=10, required=False,
        help_text="Ordered names of existing profiles to try next; no self reference, no cycles.",
    )


class ModelProfileListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ModelProfileOutputSerializer
    queryset = ModelProfile.objects.all()

    class InputSerializer(_ModelProfileFields):
        """A new profile: its writable fields plus its name, fixed from then on."""

        name = serializers.SlugField(max_length=64)

        class Meta:
            ref_name = "ModelProfileCreate"

    @extend_schema(
        operation_id="model_profiles_list",
        description="How models are reached. Keys are never stored; api_key_env names the variable.",
        responses=ModelProfileOutputSerializer(many=True),
    )
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="model_profiles_create",
        description="Register a model profile.",
        request=InputSerializer,
        responses={201: ModelProfileOutputSerializer},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        profile = services.model_profile_create(values=serializer.validated_data)
        return Response(self.get_serializer(profile).data, status=status.HTTP_201_CREATED)


class ModelProfileDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ModelProfileOutputSerializer
    queryset = ModelProfile.objects.all()
    lookup_field = "name"

    class InputSerializer(_ModelProfileFields):
        """Changes to a profile; the name is fixed (fallbacks and agent specs refer to it)."""

        class Meta:
            ref_name = "ModelProfileUpdate"

    @extend_schema(
        operation_id="model_profiles_retrieve",
        description="One model profile.",
        responses=ModelProfileOutputSerializer,
    )
    def get(self, request, name):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        operation_id="model_profiles_partial_update",
        description="Change a model profile; the name is fixed.",
        request=InputSerializer,
        responses=ModelProfileOutputSerializer,
    )
    def patch(self, request, name):
        profile = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        profile = services.model_profile_update(profile=profile, values=serializer.validated_data)
        return Response(self.get_serializer(profile).data)


class ModelProfileTestOutputSerializer(serializers.Serializer):
    """One call to the profile's server, no retries and no fallbacks. Errors never contain a key."""

    profile = serializers.CharField()
    backend = serializers.CharField()
    model = serializers.CharField(help_text="The model that answered (the server's name for it) or the profile's.")
    ok = serializers.BooleanField()
    latency_ms = serializers.IntegerField(allow_null=True)
    reply = serializers.CharField(help_text="The start of the model's answer.")
    error = serializers.CharField(help_text="Why the call failed; empty when it did not.")
    breaker = serializers.ChoiceField(choices=["closed", "open", "half_open"], help_text="The breaker after the test.")


class ModelProfileTestApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ModelProfileTestOutputSerializer
    queryset = ModelProfile.objects.all()
    lookup_field = "name"

    @extend_schema(
        operation_id="model_profiles_test",
        description="Test a profile: one call to its server (no retries, no fallbacks, even with its breaker open). "
                    "200 whether or not the server answered; `ok` says which. A success closes the breaker.",
        request=None,
        responses=ModelProfileTestOutputSerializer,
    )
    def post(self, request, name):
        return Response(self.get_serializer(services_model_profile_test(profile=self.get_object())).data)


# --- the tool registry -------------------------------------------------------------------


class ToolOutputSerializer(serializers.ModelSerializer):
    """A registered tool, whatever its source. Disabled or held tools are never shown to a model."""

    tool_source = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    approver_role = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    change_diff = serializers.SerializerMethodField(help_text="Held tools: approved vs reported now, as a unified diff.")
    trusted = serializers.BooleanField(
        source="output_trusted", read_only=True,
        help_text="Whether reading its results leaves a run untainted: its source's mark, or its own for a built-in.")

    class Meta:
        model = Tool
        ref_name = "Tool"
        fields = [
            "name", "description", "input_schema", "side_effect", "enabled", "source", "handler", "timeout_seconds",
            "tool_source", "remote_name", "requires_approval", "approver_role", "held", "pending_change",
            "change_diff", "trusted_output", "trusted", "created_at", "updated_at",
        ]
        read_only_fields = ["trusted_output"]

    def get_change_diff(self, tool) -> str:
        return tool_change_diff(tool)


class ToolListApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ToolOutputSerializer
    queryset = Tool.objects.select_related("tool_source", "approver_role")
    filterset_fields = ["enabled", "side_effect", "source", "held"]

    @extend_schema(
        operation_id="tools_list",
        description="The tool registry, whatever the source.",
        responses=ToolOutputSerializer(many=True),
    )
    def get(self, request):
        return self.list_response()


class ToolDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ToolOutputSerializer
    queryset = Tool.objects.all()
    lookup_field = "name"

    class InputSerializer(StrictSerializer):
        """What an admin may change about a tool; name, schema and handler come from its source."""

        enabled = serializers.BooleanField(required=False, help_text="Disabled tools are never shown to a model.")
        side_effect = serializers.BooleanField(required=False)
        description = serializers.CharField(required=False)
        timeout_seconds = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
        requires_approval = serializers.BooleanField(
            required=False, help_text="Every call waits for the approver role, whatever the policies say.")
        approver_role = StaffedRoleField(required=False, allow_null=True)
        trusted_output = serializers.BooleanField(
            required=False, help_text="Built-in tools only: its results hold no outsiders' text, so reading them does "
                                      "not taint a run (409 for a discovered tool: mark its source). Recorded.")
        trust_reason = serializers.CharField(required=False, allow_blank=True, max_length=1000,
                                             help_text="Why the trust mark changes; kept with the change.")

        class Meta:
            ref_name = "ToolUpdate"

    @extend_schema(
        operation_id="tools_retrieve",
        description="One registered tool.",
        responses=ToolOutputSerializer,
    )
    def get(self, request, name):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        operation_id="tools_partial_update",
        description="Enable or disable a tool, or retune it.",
        request=InputSerializer,
        responses=ToolOutputSerializer,
    )
    def patch(self, request, name):
        tool = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        values = dict(serializer.validated_data)
        reason = values.pop("trust_reason", "")
        with transaction.atomic():
            if "trusted_output" in values:
                # Through agents.trust, which records who changed it.
                tool = tool_trust(tool=tool, trusted=values.pop("trusted_output"), user=request.user, reason=reason)
            tool = services.tool_update(tool=tool, values=values)
        return Response(self.get_serializer(tool).data)
