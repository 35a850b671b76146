"""The tool-sources API: register MCP servers, OpenAPI services and Python modules, sync them,
and re-approve a tool held because it changed at its source. Governance admins only: a source's
command line and URLs are infrastructure, not something every role needs to read.
"""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import sources
from agents.api_fields import TimeoutField
from agents.api_tools import ToolOutputSerializer
from agents.models import Tool, ToolSource
from agents.api_trust import TrustProposalSerializer, proposed
from agents.trust import tool_source_trust, trust_propose
from agents.trust_approval import approval_propose, change_propose, loosening_split, reapproval_proposed
from agents.services import HTTP_URL_PATTERN, KeyEnvNameValidator
from core.approver_roles import StaffedRoleField
from agents.sources import HEADER_NAME
from core.api_fields import StrictSerializer
from core.api_views import PaginatedList, errors
from core.permissions import IsGovernanceAdmin


class ToolSourceOutputSerializer(serializers.ModelSerializer):
    approver_role = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    tools = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = ToolSource
        ref_name = "ToolSource"
        fields = [
            "name", "kind", "description", "command", "env_passthrough", "url", "document", "path", "base_url",
            "auth_header", "auth_env", "timeout_seconds", "approver_role", "enabled", "trusted", "tools", "last_synced_at",
            "last_sync_ok", "last_sync_error_code", "last_sync_error", "created_at", "updated_at",
        ]
        # What the last sync found is written by syncs only (agents.sources.tool_source_sync).
        read_only_fields = ["last_synced_at", "last_sync_ok", "last_sync_error_code", "last_sync_error", "trusted"]


class _SourceFields(StrictSerializer):
    description = serializers.CharField(required=False, allow_blank=True)
    command = serializers.ListField(child=serializers.CharField(max_length=1000), max_length=64, required=False,
                                    help_text="mcp_stdio: the program and its arguments, e.g. [\"mcp-server-time\"].")
    env_passthrough = serializers.ListField(
        child=serializers.CharField(max_length=128, validators=[KeyEnvNameValidator()]), max_length=64, required=False,
        help_text="mcp_stdio: environment variables the server process may see (never the platform's own: "
                  "DJANGO_*, DATABASE*, CELERY_*, WARRANT_* ...).")
    # RegexFields, so that the schema states the rules that agents.sources checks.
    url = serializers.RegexField(HTTP_URL_PATTERN, max_length=500, required=False, allow_blank=True,
                                 help_text="mcp_http: the endpoint; openapi: where the document is served.")
    document = serializers.JSONField(required=False, allow_null=True, help_text="openapi: the document itself.")
    path = serializers.CharField(max_length=500, required=False, allow_blank=True,
                                 help_text="openapi: a document file on the server; python: a dotted path.")
    base_url = serializers.RegexField(HTTP_URL_PATTERN, max_length=500, required=False, allow_blank=True,
                                      help_text="openapi: where calls go; default the document's first server.")
    auth_header = serializers.RegexField(HEADER_NAME.pattern, max_length=64, required=False, allow_blank=True)
    auth_env = serializers.CharField(max_length=128, required=False, allow_blank=True, validators=[KeyEnvNameValidator()],
                                     help_text="Name of the environment variable holding the header's value, never the "
                                               "value; not one of the platform's own (DJANGO_…, DATABASE…, WARRANT_…).")
    timeout_seconds = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
    approver_role = StaffedRoleField(
        required=False, allow_null=True,
        help_text="Approves the side-effecting tools a sync discovers. On PATCH, naming one where there was none takes "
                  "effect at once; changing or clearing it is proposed (202, kind approval) and set when another "
                  "governance admin confirms it.")
    enabled = serializers.BooleanField(required=False)
    trusted = serializers.BooleanField(
        required=False, help_text="Its tools' descriptions and results are not outsiders' text, so reading them does "
                                  "not taint a run. false takes effect at once; true is proposed (a TrustProposal, "
                                  "202 on PATCH) and set when another governance admin confirms it. Recorded with "
                                  "who set it (agents.TrustChange).")
    trust_reason = serializers.CharField(required=False, allow_blank=True, max_length=1000,
                                         help_text="Why the trust mark or the approver role changes; kept with the "
                                                   "change, or with the proposal.")


def _trust(source: ToolSource, values: dict, user):
    """A trust mark goes through agents.trust, never as a plain field: untrusted at once, trusted
    proposed (the proposal, or None when nothing was asked for trust)."""
    reason = values.pop("trust_reason", "")
    if values.get("trusted") is True:  # already trusted: nothing to propose, as a PATCH of the same value
        return None if source.trusted else trust_propose(target=source, user=user, reason=reason)
    if "trusted" in values:
        tool_source_trust(source=source, trusted=values.pop("trusted"), user=user, reason=reason)
    return None


class ToolSourceListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ToolSourceOutputSerializer
    queryset = ToolSource.objects.select_related("approver_role").prefetch_related("tools")

    class InputSerializer(_SourceFields):
        name = serializers.SlugField(max_length=32)
        kind = serializers.ChoiceField(choices=ToolSource.Kind.choices)

        class Meta:
            ref_name = "ToolSourceCreate"

    @extend_schema(operation_id="tool_sources_list", description="Registered tool sources.",
                   responses=ToolSourceOutputSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(operation_id="tool_sources_create",
                   description="Register a source. Nothing is discovered until it is synced. It starts "
                               "untrusted: trusted: true proposes the mark (trust-proposals/).",
                   request=InputSerializer, responses={201: ToolSourceOutputSerializer, **errors(400, 403, 409)})
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = dict(serializer.validated_data)
        trust = {k: values.pop(k) for k in ("trusted", "trust_reason") if k in values}
        with transaction.atomic():
            source = sources.tool_source_create(values=values, user=request.user)
            _trust(source, trust, request.user)  # trusted: true is a proposal; the source starts untrusted
        return Response(self.get_serializer(source).data, status=status.HTTP_201_CREATED)


class ToolSourceDetailApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ToolSourceOutputSerializer
    queryset = ToolSource.objects.select_related("approver_role").prefetch_related("tools")
    lookup_field = "name"

    class InputSerializer(_SourceFields):
        class Meta:
            ref_name = "ToolSourceUpdate"

    @extend_schema(operation_id="tool_sources_retrieve", description="One tool source.",
                   responses={200: ToolSourceOutputSerializer, **errors(403, 404)})
    def get(self, request, name):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(operation_id="tool_sources_partial_update",
                   description="Change how a source is reached; the name and kind are fixed. With trusted: true "
                               "the other changes are made and marking it trusted is proposed: 202 with the "
                               "proposal (trust-proposals/), the mark unchanged until another governance admin "
                               "confirms it. Changing or clearing its approver_role is proposed the same way (202, "
                               "kind approval). One request makes one proposal (409 one_proposal_at_a_time).",
                   request=InputSerializer, responses={200: ToolSourceOutputSerializer, 202: TrustProposalSerializer,
                                                       **errors(400, 403, 404, 409)})
    def patch(self, request, name):
        source = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        values = dict(serializer.validated_data)
        trust = {k: values.pop(k) for k in ("trusted", "trust_reason") if k in values}
        with transaction.atomic():
            # Changing or clearing a set approver role is proposed (agents.trust_approval), after the rest.
            loosening = loosening_split(source, values, trust_asked=trust.get("trusted") is True and not source.trusted)
            source = sources.tool_source_update(source=source, values=values, user=request.user)
            reason = trust.get("trust_reason", "")
            proposal = _trust(source, trust, request.user)  # None when there is a loosening (else a 409 above)
            if loosening:
                proposal = approval_propose(target=source, user=request.user, change=loosening, reason=reason)
        if proposal is not None:
            return proposed(proposal)
        source.refresh_from_db(fields=["trusted"])
        return Response(self.get_serializer(source).data)


class SyncErrorSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=sorted(sources.SYNC_ERROR_CODES), help_text="; ".join(
        f"{code}: {meaning}" for code, meaning in sources.SYNC_ERROR_CODES.items()))
    message = serializers.CharField()


class SyncReportSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="Whether the sync worked. When it did not, `error` says why, the "
                                            "source records it (last_sync_ok, last_sync_error) and no tool changed.")
    synced_at = serializers.DateTimeField()
    error = SyncErrorSerializer(allow_null=True, help_text="Null when the sync worked.")
    created = serializers.ListField(child=serializers.CharField(), help_text="New tools: disabled, granted to no role.")
    changed = serializers.ListField(child=serializers.CharField(), help_text="Held: changed since approval.")
    unchanged = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField(), help_text="Held: no longer offered.")
    rejected = serializers.ListField(child=serializers.DictField(child=serializers.CharField()),
                                     help_text="Left out, with the reason: {name, reason}.")


class ToolSourceSyncApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = SyncReportSerializer
    queryset = ToolSource.objects.all()
    lookup_field = "name"

    @extend_schema(operation_id="tool_sources_sync", request=None,
                   description="Discover the source's tools. New ones arrive disabled and granted to no role; "
                               "a tool whose description or schema changed is held until re-approved. "
                               "200 whether or not the source could be reached or used; `ok` says which, and a "
                               "failed sync changes no tool. 409 when a tool it offers would take the name of a "
                               "tool outside the source (recorded on the source too).",
                   responses={200: SyncReportSerializer, **errors(403, 404, 409)})
    def post(self, request, name):
        return Response(self.get_serializer(sources.tool_source_sync(source=self.get_object())).data)


class ToolApproveChangeApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ToolOutputSerializer
    queryset = Tool.objects.select_related("tool_source")
    lookup_field = "name"

    @extend_schema(operation_id="tools_approve_change", request=None,
                   description="Accept the change a held tool's source reports (see pending_change and change_diff). "
                               "For a trusted source's tool it is proposed instead: 202 with the proposal (kind "
                               "change, trust-proposals/), the tool held until another governance admin confirms it.",
                   responses={200: ToolOutputSerializer, 202: TrustProposalSerializer, **errors(403, 404, 409)})
    def post(self, request, name):
        tool = self.get_object()
        if reapproval_proposed(tool):
            return proposed(change_propose(tool=tool, user=request.user))
        tool = sources.tool_change_approve(tool=tool, user=request.user)
        return Response(self.get_serializer(tool).data)
