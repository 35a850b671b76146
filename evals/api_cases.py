"""The golden cases API: per agent, an input, the caller's roles and what must happen; each change
a version (evals.cases), and the recording of a case against the live data. A new case is made at
once; an edit, a deletion or a recording is a proposal (202) a second governance admin approves
(evals.proposals, evals.api_proposals)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents.models import Agent
from core.api_errors import Conflict
from core.api_fields import StrictFieldsMixin
from core.api_views import PaginatedList, errors
from evals.cases import case_changed
from evals.models import GoldenCase, GoldenCaseProposal, GoldenCaseVersion, unknown_roles
from evals.proposals import changed_fields, propose, propose_record
from evals.permissions import ReadEvalsWriteGovernanceAdmin
from runs.start import MAX_INPUT_CHARS

# The fields GoldenCase.clean checks together.
CHECKED = ("expected_status", "awaiting_tool", "stop_reason", "error", "decision")


def _names(help_text: str) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(max_length=200), required=False, help_text=help_text)


class CaseSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", queryset=Agent.objects.all(),
                                         error_messages={"does_not_exist": "unknown agent {value}"})
    input = serializers.CharField(max_length=MAX_INPUT_CHARS, trim_whitespace=False,
                                  help_text="The request, as an operator would send it.")
    roles = serializers.ListField(child=serializers.CharField(max_length=150), allow_empty=True,
                                  help_text="The caller's roles: the case runs as a synthetic caller in exactly these.")
    tools_called = _names("Tools that must be called (and have run).")
    tools_not_called = _names("Tools that must not be called at all.")
    output_contains = _names("Text the answer must contain.")
    output_excludes = _names("Text the answer must not contain.")
    policies_fired = _names("Names of policies that must fire.")
    recordings = serializers.JSONField(read_only=True, help_text=(
        "What the read-only tools answered when the case was recorded ({tool, arguments, result} each): the "
        "case runs against these. Written only by POST evals/cases/{id}/record/."))
    recorded_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = GoldenCase
        ref_name = "GoldenCase"
        fields = ["id", "agent", "name", "description", "input", "roles", "decision", "expected_status",
                  "awaiting_tool", "stop_reason", "error", "tools_called", "tools_not_called", "output_contains",
                  "output_excludes", "policies_fired", "enabled", "version", "recordings", "recorded_at", "recorded_by",
                  "created_at", "updated_at"]
        read_only_fields = ["id", "version", "recorded_at", "created_at", "updated_at"]
        validators = []  # the (agent, name) constraint answers 409, below

    def validate_roles(self, roles: list[str]) -> list[str]:
        if unknown := unknown_roles(roles):
            raise serializers.ValidationError(f"no role named {unknown[0]!r}")
        return roles

    def validate(self, attrs):
        values = {f: getattr(self.instance, f) for f in CHECKED} if self.instance else {}
        try:
            GoldenCase(**values | {f: attrs[f] for f in CHECKED if f in attrs}).clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return attrs


class VersionSerializer(serializers.ModelSerializer):
    changed_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    values = serializers.JSONField(read_only=True, help_text="The case as this change left it, recordings included.")
    # Not "action": policies' versions have one with other values, and one name per value set keeps the schema's enums apart.
    change = serializers.ChoiceField(source="action", choices=GoldenCaseVersion.Action.choices, read_only=True)
    proposed_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True, help_text=(
        "Who proposed the change changed_by approved; null for a new case or the platform's change."))

    class Meta:
        model = GoldenCaseVersion
        ref_name = "GoldenCaseVersion"
        fields = ["version", "change", "note", "changed_by", "proposed_by", "changed_at", "values"]


class ProposalSerializer(serializers.ModelSerializer):
    proposed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    changes = serializers.JSONField(read_only=True, help_text=(
        "For an update: each changed field and its new value; for a recording: {recordings}; for a deletion: {}."))

    class Meta:
        model = GoldenCaseProposal
        ref_name = "GoldenCaseProposal"
        fields = ["id", "case", "agent_slug", "case_name", "kind", "base_version", "changes", "note", "proposed_by",
                  "created_at", "status", "decided_by", "decided_at"]
        read_only_fields = fields


PROPOSED = ("Nothing changes yet: the answer is a pending proposal, which the gate ignores until a different "
            "governance admin approves it (POST evals/case-proposals/{id}/approve/).")


def _create(serializer, user) -> GoldenCase:
    try:
        with transaction.atomic():
            case = serializer.save()
            case_changed(case, None, user=user)
            return case
    except IntegrityError:
        raise Conflict("the agent already has a golden case of that name") from None


class CaseListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = CaseSerializer
    queryset = GoldenCase.objects.select_related("agent")
    filterset_fields = ["agent__slug", "enabled", "expected_status"]

    @extend_schema(operation_id="eval_cases_list", summary="List golden cases", responses=CaseSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(operation_id="eval_cases_create", summary="Create a golden case", request=CaseSerializer,
                   responses={201: CaseSerializer, **errors(400, 403, 409)})
    def post(self, request):
        serializer = CaseSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(CaseSerializer(_create(serializer, request.user)).data, status=status.HTTP_201_CREATED)


class CaseDetailApi(GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = CaseSerializer
    queryset = GoldenCase.objects.select_related("agent")
    lookup_url_kwarg = "case_id"

    @extend_schema(operation_id="eval_cases_retrieve", summary="Read a golden case",
                   responses={200: CaseSerializer, **errors(403, 404)})
    def get(self, request, case_id):
        return Response(CaseSerializer(self.get_object()).data)

    @extend_schema(operation_id="eval_cases_partial_update", summary="Propose a change of a golden case",
                   request=CaseSerializer, description=PROPOSED + " A change of no value answers 200 with the case.",
                   responses={202: ProposalSerializer, 200: CaseSerializer, **errors(400, 403, 404, 409)})
    def patch(self, request, case_id):
        case = self.get_object()
        serializer = CaseSerializer(case, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = changed_fields(case, serializer.validated_data)
        if not changes:
            return Response(CaseSerializer(case).data)
        proposal = propose(case, GoldenCaseProposal.Kind.UPDATE, user=request.user, changes=changes)
        return Response(ProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(operation_id="eval_cases_destroy", summary="Propose the deletion of a golden case",
                   description=PROPOSED, responses={202: ProposalSerializer, **errors(403, 404)})
    def delete(self, request, case_id):
        proposal = propose(self.get_object(), GoldenCaseProposal.Kind.DELETE, user=request.user)
        return Response(ProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)


class CaseRecordApi(GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = CaseSerializer
    queryset = GoldenCase.objects.select_related("agent")
    lookup_url_kwarg = "case_id"

    @extend_schema(
        operation_id="eval_cases_record", summary="Propose a recording of a golden case against the live data",
        request=None,
        description="Runs the case once with every read-only tool answering live (side effects still go to the "
                    "sandbox) and proposes what each answered as the case's recordings. " + PROPOSED + " Refused "
                    "(409 `recording_refused`, nothing proposed) when the case does not pass against the live "
                    "data, with its failures, or when a tool's answer cannot be kept.",
        responses={202: ProposalSerializer, **errors(403, 404, 409)},
    )
    def post(self, request, case_id):
        proposal = propose_record(self.get_object(), user=request.user, via="the API")
        return Response(ProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)


class CaseVersionsApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadEvalsWriteGovernanceAdmin]
    serializer_class = VersionSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no case
            return GoldenCaseVersion.objects.none()
        return GoldenCaseVersion.objects.filter(case_id=self.kwargs["case_id"]).select_related("changed_by")

    @extend_schema(operation_id="eval_cases_versions", summary="A golden case's versions, newest first",
                   responses=VersionSerializer(many=True))
    def get(self, request, case_id):
        get_object_or_404(GoldenCase, pk=case_id)
        return self.list_response()
