"""The policy drafts API: propose a change, run its gate, activate it (or in an emergency: asked for
with a reason by one governance admin, confirmed by another), and the Policy Lab's trial of an
unsaved draft against the golden sets.

Thin views over governance.drafts. Reads are open to anyone with a role, as policies are; writes
and trials to governance admins.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_fields import StrictSerializer
from core.api_views import errors
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin
from governance import drafts
from governance.api_policies import PolicyInputSerializer, PolicyOutputSerializer, refuse_duplicate_policy_name
from governance.models import Policy, PolicyDraft


class GateReportField(serializers.JSONField):
    """The gate's report: subject, eval_run, threshold, total, passed, pass_rate, agents,
    agents_without_cases, changed, broken and unrecorded (case names), and cases: each with before
    and after (passed, status, awaiting_tool, tools_called, policies_fired, output excerpt, failures,
    unrecorded: the read-only calls no recording answered, which went to the live data)."""


@extend_schema_field(PolicyInputSerializer)
class PolicyValuesField(serializers.DictField):
    """A policy's values as the policy API takes them (checked by PolicyInput: partial for an existing policy)."""


class DraftOutputSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    activated_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    emergency_requested_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    gate_report = GateReportField(read_only=True, allow_null=True)

    class Meta:
        model = PolicyDraft
        ref_name = "PolicyDraft"
        fields = ["id", "policy", "policy_name", "action", "base_version", "values", "state", "gate_eval_run_id",
                  "gate_report", "created_by", "created_at", "activated_by", "activated_at", "emergency_reason",
                  "emergency_requested_by", "emergency_requested_at"]


class DraftInputSerializer(StrictSerializer):
    policy = serializers.IntegerField(required=False, allow_null=True,
                                      help_text="The policy the draft changes or deletes; none: a new policy.")
    values = PolicyValuesField(required=False, help_text=(
        "The values to change, as PATCH policies/{id}/ takes them; a new policy needs name and type."))
    delete = serializers.BooleanField(required=False, default=False, help_text="The draft deletes the policy.")

    class Meta:
        ref_name = "PolicyDraftInput"

    def validate(self, data):
        policy_id, values, delete = data.get("policy"), data.get("values"), data.get("delete")
        if delete and policy_id is None:
            raise serializers.ValidationError({"delete": ["a deletion names the policy it deletes"]})
        if delete and values:
            raise serializers.ValidationError({"values": ["a deletion carries no values"]})
        if not delete and values is None:
            raise serializers.ValidationError({"values": ["the values the policy would have"]})
        if values is not None:
            inner = PolicyInputSerializer(data=values, partial=policy_id is not None)
            if not inner.is_valid():
                raise serializers.ValidationError({"values": inner.errors})
            data["values"] = inner.validated_data
        data["policy"] = get_object_or_404(Policy, pk=policy_id) if policy_id is not None else None
        return data


class ActivateInputSerializer(StrictSerializer):
    emergency_reason = serializers.CharField(
        required=False, allow_blank=True, max_length=2000,
        help_text="Ask for the emergency path: activate even though the golden set fails, for this stated "
                  "reason. Nothing is in force until another governance admin confirms it (confirm_emergency).")
    confirm_emergency = serializers.BooleanField(
        required=False, default=False,
        help_text="Confirm the emergency asked for on this draft (its reason); refused to the one who asked and to "
                  "the draft's author. Recorded on the draft, in the policy's history and in its mark, which "
                  "receipts of runs it governs show.")

    class Meta:
        ref_name = "PolicyDraftActivateInput"

    def validate(self, data):
        if data.get("confirm_emergency") and data.get("emergency_reason", "").strip():
            raise serializers.ValidationError(
                {"confirm_emergency": ["confirm the reason asked for, or ask with a reason; not both"]})
        return data


class ActivatedSerializer(serializers.Serializer):
    draft = DraftOutputSerializer()
    policy = PolicyOutputSerializer(allow_null=True, help_text="The policy in force; null after a deletion.")

    class Meta:
        ref_name = "PolicyDraftActivated"


class TrialOutputSerializer(serializers.Serializer):
    passed = serializers.BooleanField(help_text="Whether the golden sets pass at the threshold with the draft in place.")
    eval_run = serializers.CharField(allow_null=True)
    report = GateReportField()

    class Meta:
        ref_name = "PolicyGoldenTrial"


def _propose(data, user) -> PolicyDraft:
    values = dict(data.get("values") or {})
    refuse_duplicate_policy_name(values.get("name"), exclude_pk=data["policy"].pk if data["policy"] else None)
    return drafts.draft_propose(policy=data["policy"], values=values, delete=data["delete"], user=user)


def _draft(draft_id) -> PolicyDraft:
    return get_object_or_404(PolicyDraft.objects.select_related("policy", "created_by", "activated_by",
                                                                "emergency_requested_by"), pk=draft_id)


@extend_schema_view(get=extend_schema(operation_id="policy_drafts_list", summary="List policy drafts, newest first"))
class DraftListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = DraftOutputSerializer
    filter_backends = []

    def get_queryset(self):
        return PolicyDraft.objects.select_related("created_by", "activated_by", "emergency_requested_by")

    @extend_schema(operation_id="policy_drafts_create", summary="Propose a policy change as a draft (not in force)",
                   request=DraftInputSerializer, responses={201: DraftOutputSerializer, **errors(400, 403, 404, 409)})
    def post(self, request):
        serializer = DraftInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        draft = _propose(serializer.validated_data, request.user)
        return Response(DraftOutputSerializer(_draft(draft.pk)).data, status=status.HTTP_201_CREATED)


class DraftDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = DraftOutputSerializer

    @extend_schema(operation_id="policy_drafts_retrieve", summary="Read a policy draft and its last gate",
                   responses={200: DraftOutputSerializer, **errors(403, 404)})
    def get(self, request, draft_id):
        return Response(DraftOutputSerializer(_draft(draft_id)).data)


class DraftGateApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = DraftOutputSerializer

    @extend_schema(operation_id="policy_drafts_gate", summary="Run a draft's gate (the golden sets, before and after); activates nothing",
                   request=None, responses={200: DraftOutputSerializer, **errors(403, 404, 409)})
    def post(self, request, draft_id):
        draft = drafts.draft_gate(draft=_draft(draft_id), user=request.user)
        return Response(DraftOutputSerializer(_draft(draft.pk)).data)


class DraftActivateApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ActivateInputSerializer

    @extend_schema(
        operation_id="policy_drafts_activate", summary="Activate a draft: when its gate passes, or in an emergency",
        description="Runs the gate again (what is in force may have changed). It passes: the change is in force, "
                    "its history row names the draft and the eval run. It fails: 409 `gate_failed` with the report "
                    "(each case before and after), nothing changes. The emergency path takes two governance admins: "
                    "`emergency_reason` asks for it (202, the draft names who asked; nothing is in force yet, 409 "
                    "`emergency_pending` if it was asked already); `confirm_emergency` by another governance admin "
                    "puts it in force whatever the gate says (403 `second_admin_required` to the one who asked and "
                    "to the draft's author, 409 `no_emergency_request` when none was asked), and the policy is "
                    "marked, naming both, so the receipts of the runs it governs show it.",
        request=ActivateInputSerializer,
        responses={200: ActivatedSerializer, 202: DraftOutputSerializer, **errors(400, 403, 404, 409)})
    def post(self, request, draft_id):
        serializer = ActivateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        reason = serializer.validated_data.get("emergency_reason", "").strip()
        draft = _draft(draft_id)
        if reason:
            drafts.draft_request_emergency(draft=draft, reason=reason, user=request.user)
            return Response(DraftOutputSerializer(_draft(draft.pk)).data, status=status.HTTP_202_ACCEPTED)
        if serializer.validated_data["confirm_emergency"]:
            policy = drafts.draft_confirm_emergency(draft=draft, user=request.user)
        else:
            policy = drafts.draft_activate(draft=draft, user=request.user)
        return Response({"draft": DraftOutputSerializer(_draft(draft.pk)).data,
                         "policy": PolicyOutputSerializer(policy).data if policy is not None else None})


class DraftDiscardApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = DraftOutputSerializer

    @extend_schema(operation_id="policy_drafts_discard", summary="Discard an open draft", request=None,
                   responses={200: DraftOutputSerializer, **errors(403, 404, 409)})
    def post(self, request, draft_id):
        draft = drafts.draft_discard(draft=_draft(draft_id), user=request.user)
        return Response(DraftOutputSerializer(_draft(draft.pk)).data)


class GoldenTrialApi(GenericAPIView):
    """The Policy Lab against the golden sets: the draft in place, nothing saved but the eval run."""

    permission_classes = [IsGovernanceAdmin]
    serializer_class = DraftInputSerializer

    @extend_schema(
        operation_id="policies_evaluate_golden", summary="Run the golden sets against an unsaved draft",
        description="The values are validated as a save would be, then every enabled golden case of the agents "
                    "the policy governs runs before and after, with the draft in place; no draft is saved and no "
                    "policy changes. The eval run (purpose `lab`) keeps the report.",
        request=DraftInputSerializer, responses={200: TrialOutputSerializer, **errors(400, 403, 404, 409)})
    def post(self, request):
        serializer = DraftInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        verdict = drafts.draft_trial(policy=data["policy"], values=dict(data.get("values") or {}),
                                     delete=data["delete"], user=request.user)
        return Response({"passed": verdict.passed, "eval_run": verdict.eval_run_id, "report": verdict.report})
