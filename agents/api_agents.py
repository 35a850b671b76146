"""The agents API: drafts and their published versions.

Thin views over agents.services. Reads are for anyone with a role; writes for governance admins.
Inputs name every writable field: anything else in a body is refused, never silently dropped.
"""

import jsonschema
from django.db.models import Max
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import services
from agents.models import Agent, AgentVersion
from core.api_fields import StrictSerializer
from core.api_views import PaginatedList
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin


def _agents():
    return (Agent.objects.select_related("model_profile", "budget_role").prefetch_related("tools")
            .annotate(current_version_number=Max("versions__version")))


class AgentOutputSerializer(serializers.ModelSerializer):
    """The editable draft, with the number of the version new runs use."""

    model_profile = serializers.SlugRelatedField(slug_field="name", read_only=True)
    tools = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    current_version = serializers.IntegerField(
        source="current_version_number", allow_null=True, read_only=True,
        help_text="The latest published version (what new runs use); null until the first publish.",
    )
    budget_role = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True,
        help_text="The role whose members may extend a run's budget when it runs out; null: the run stops.")

    class Meta:
        model = Agent
        ref_name = "Agent"
        fields = [
            "slug", "name", "description", "instructions", "model_profile", "tools", "output_schema", "max_turns",
            "max_tool_calls", "max_tokens", "deadline_seconds", "tool_caps", "budget_role", "current_version",
            "created_at", "updated_at",
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
    tool_caps = serializers.DictField(
        child=serializers.IntegerField(min_value=1, max_value=10_000), required=False,
        help_text='Calls allowed per run, per tool the agent has, e.g. {"send_email": 1}; a call over its cap is '
                  "refused (code tool_cap) and the model reads why.")
    budget_role = serializers.CharField(
        max_length=150, allow_null=True, required=False,
        help_text="Name of the role whose members may extend a run's budget (tokens, tool calls, turns, deadline) "
                  "when it runs out; the run waits in awaiting_budget. Null: no extensions, the run stops.")


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
