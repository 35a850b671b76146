"""The tool registry API: every registered tool, whatever its source, and the changes an admin makes to one."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import services
from agents.api_fields import TimeoutField
from agents.models import Tool
from agents.sources import tool_change_diff
from agents.api_trust import TrustProposalSerializer, proposed
from agents.trust import tool_trust, trust_propose
from agents.trust_approval import approval_propose, loosening_split
from core.api_fields import StrictSerializer
from core.api_views import PaginatedList, errors
from core.approver_roles import StaffedRoleField
from core.permissions import ReadAnyRoleWriteGovernanceAdmin


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
        side_effect = serializers.BooleanField(
            required=False, help_text="true declares that the tool changes the world; false is refused (409 "
                                      "side_effect_declared) for a tool declared side-effecting.")
        description = serializers.CharField(
            required=False,
            help_text="Built-in tools only: a discovered tool's is its source's (409 described_by_source).")
        timeout_seconds = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
        requires_approval = serializers.BooleanField(
            required=False, help_text="Every call waits for the approver role, whatever the policies say. true takes "
                                      "effect at once; false, for a tool that requires approval, is proposed (202) "
                                      "and set when another governance admin confirms it.")
        approver_role = StaffedRoleField(
            required=False, allow_null=True,
            help_text="Who approves its calls. Naming one where there was none takes effect at once; changing or "
                      "clearing it is proposed (202), as lifting requires_approval is.")
        trusted_output = serializers.BooleanField(
            required=False, help_text="Built-in tools only: its results hold no outsiders' text, so reading them does "
                                      "not taint a run (409 for a discovered tool: mark its source). false takes "
                                      "effect at once; true is proposed (202) and set when another governance "
                                      "admin confirms it. Recorded.")
        trust_reason = serializers.CharField(required=False, allow_blank=True, max_length=1000,
                                             help_text="Why the trust mark or the approval changes; kept with the "
                                                       "change, or with the proposal.")

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
        description="Enable or disable a tool, or retune it. With trusted_output: true the other changes are made "
                    "and marking it trusted is proposed: 202 with the proposal (trust-proposals/), the mark "
                    "unchanged until another governance admin confirms it. Loosening its approval (requires_approval "
                    "true -> false, changing or clearing a set approver_role) is proposed the same way (202, kind "
                    "approval); tightening it is made at once. One request makes one proposal (409 "
                    "one_proposal_at_a_time).",
        request=InputSerializer,
        responses={200: ToolOutputSerializer, 202: TrustProposalSerializer, **errors(400, 403, 404, 409)},
    )
    def patch(self, request, name):
        tool = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        values = dict(serializer.validated_data)
        reason = values.pop("trust_reason", "")
        proposal = None
        with transaction.atomic():
            # What no one may change (409), on the row as it is now, locked, before anything is written.
            services.tool_fixed_check(Tool.objects.select_related("tool_source").select_for_update(of=("self",))
                                      .get(pk=tool.pk), values)
            # Lifting requires_approval, changing or clearing the approver role: proposed below, after the rest.
            loosening = loosening_split(tool, values, trust_asked=values.get("trusted_output") is True and bool(
                tool.tool_source_id or not tool.trusted_output))
            # Through agents.trust, which records who changed it: untrusted at once, trusted proposed.
            if "trusted_output" in values:
                if not values.pop("trusted_output"):
                    tool = tool_trust(tool=tool, trusted=False, user=request.user, reason=reason)
                elif tool.tool_source_id or not tool.trusted_output:  # a discovered tool: 409 from agents.trust
                    proposal = trust_propose(target=tool, user=request.user, reason=reason)
            tool = services.tool_update(tool=tool, values=values, user=request.user)  # a tightening: sealed as theirs
            if loosening:
                proposal = approval_propose(target=tool, user=request.user, change=loosening, reason=reason)
        return proposed(proposal) if proposal is not None else Response(self.get_serializer(tool).data)
