"""The policies API: list, create, read, change and delete policies, and read a policy's history.

Thin views over governance.drafts (a write is a draft put in force through its gate). Reads are open to anyone with a role, writes to governance
admins (see core.permissions). Every input serializer is strict: a body that carries a field the
operation does not accept is refused, never silently ignored.
"""

import django_filters
from django.db.models import Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_errors import Conflict
from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.permissions import ReadAnyRoleWriteGovernanceAdmin
from governance import drafts
from governance.models import MatchMode, Policy, PolicyType, PolicyVersion


def refuse_duplicate_policy_name(name: str | None, *, exclude_pk: int | None = None) -> None:
    if name and Policy.objects.filter(name=name).exclude(pk=exclude_pk).exists():
        raise Conflict(f"a policy named {name!r} already exists", details={"name": name})


# A write here is a draft activated through its gate (governance.drafts): in force only when the
# golden sets of the agents it governs pass with it; a failing gate answers 409 gate_failed with
# the draft's id and report, and the draft waits for a fix or the emergency path (policies/drafts/).
GATED = ("Goes through the gate: saved as a draft and in force only if the golden sets of the agents it "
         "governs pass with it in place; otherwise 409 `gate_failed` with the draft and each case before and "
         "after, and nothing changes (see policies/drafts/).")




class PolicyOutputSerializer(serializers.ModelSerializer):
    agents = serializers.SlugRelatedField(many=True, read_only=True, slug_field="slug")
    approver_role = serializers.SlugRelatedField(read_only=True, slug_field="name", allow_null=True)
    escalate_to_role = serializers.SlugRelatedField(read_only=True, slug_field="name", allow_null=True)
    keywords = serializers.ListField(child=serializers.CharField())
    target_tools = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Policy
        ref_name = "Policy"
        fields = [
            "id", "name", "type", "description", "enabled", "priority", "agents", "keywords", "match_mode", "regex",
            "target_tools", "content", "response", "approver_role", "approval_ttl_seconds", "quorum",
            "escalate_to_role", "escalate_after_seconds", "version",
            "emergency_reason", "created_at", "updated_at",
        ]


class PolicyInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """What a governance admin may write; `partial=True` for PATCH. Agents and the approver role by name."""

    name = serializers.CharField(max_length=128)
    type = serializers.ChoiceField(choices=PolicyType.choices)
    description = serializers.CharField(required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)
    priority = serializers.IntegerField(required=False, min_value=-1_000_000, max_value=1_000_000)
    agents = serializers.ListField(child=serializers.SlugField(max_length=64), required=False)
    keywords = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=200)
    match_mode = serializers.ChoiceField(choices=MatchMode.choices, required=False)
    regex = serializers.CharField(max_length=512, required=False, allow_blank=True, trim_whitespace=False)
    target_tools = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=200)
    content = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    response = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    approver_role = serializers.CharField(max_length=150, required=False, allow_null=True)
    # At most 30 days: a request nobody decides for a month should expire, and the bound keeps
    # the value inside every database's integer range.
    approval_ttl_seconds = serializers.IntegerField(min_value=1, max_value=30 * 24 * 3600, required=False, allow_null=True)
    # Tool approval: distinct approvers needed (one denial denies), and where an undecided
    # request goes after how long. Escalation needs both, due before the request's TTL; the
    # roles must have at least `quorum` active members (governance.services).
    quorum = serializers.IntegerField(min_value=1, max_value=10, required=False,
                                      help_text="Approvals needed, each from a different member of the role.")
    escalate_to_role = serializers.CharField(max_length=150, required=False, allow_null=True,
                                             help_text="The role a request moves to when not decided in time.")
    escalate_after_seconds = serializers.IntegerField(
        min_value=1, max_value=30 * 24 * 3600, required=False, allow_null=True,
        help_text="How long the approver role has before the request escalates; less than the TTL.")

    class Meta:
        ref_name = "PolicyInput"


def _policies():
    return Policy.objects.select_related("approver_role", "escalate_to_role").prefetch_related("agents")


class PolicyFilter(django_filters.FilterSet):
    type = django_filters.ChoiceFilter(choices=PolicyType.choices)
    enabled = django_filters.BooleanFilter()
    agent = django_filters.CharFilter(
        method="filter_agent", label="Agent slug: the policies that apply to it (scoped to it, or to every agent)."
    )

    class Meta:
        model = Policy
        fields = ["type", "enabled", "agent"]

    def filter_agent(self, queryset, name, value):
        return queryset.filter(Q(agents__slug=value) | Q(agents__isnull=True)).distinct()


@extend_schema_view(get=extend_schema(operation_id="policies_list", summary="List policies"))
class PolicyListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = PolicyOutputSerializer
    filterset_class = PolicyFilter

    def get_queryset(self):
        return _policies()

    @extend_schema(
        operation_id="policies_create", summary="Create a policy (version 1, written to history)", description=GATED,
        request=PolicyInputSerializer, responses={201: PolicyOutputSerializer, **errors(400, 403, 409)},
    )
    def post(self, request):
        serializer = PolicyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        refuse_duplicate_policy_name(serializer.validated_data["name"])
        _, policy = drafts.propose_and_activate(values=serializer.validated_data, user=request.user)
        return Response(PolicyOutputSerializer(_policies().get(pk=policy.pk)).data, status=status.HTTP_201_CREATED)


class PolicyDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = PolicyOutputSerializer
    lookup_url_kwarg = "policy_id"

    def get_queryset(self):
        return _policies()

    @extend_schema(operation_id="policies_retrieve", summary="Read a policy", responses={200: PolicyOutputSerializer, **errors(403, 404)})
    def get(self, request, policy_id):
        return Response(PolicyOutputSerializer(self.get_object()).data)

    @extend_schema(
        operation_id="policies_partial_update", summary="Change a policy (bumps its version, written to history)",
        description=GATED, request=PolicyInputSerializer, responses={200: PolicyOutputSerializer, **errors(400, 403, 404, 409)},
    )
    def patch(self, request, policy_id):
        policy = self.get_object()
        serializer = PolicyInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        refuse_duplicate_policy_name(serializer.validated_data.get("name"), exclude_pk=policy.pk)
        _, policy = drafts.propose_and_activate(policy=policy, values=serializer.validated_data, user=request.user)
        return Response(PolicyOutputSerializer(_policies().get(pk=policy.pk)).data)

    @extend_schema(operation_id="policies_destroy", summary="Delete a policy (its history stays)", description=GATED,
                   responses={204: None, **errors(403, 404, 409)})
    def delete(self, request, policy_id):
        drafts.propose_and_activate(policy=self.get_object(), delete=True, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyVersionOutputSerializer(serializers.ModelSerializer):
    changed_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    emergency_requested_by = serializers.SlugRelatedField(
        read_only=True, slug_field="username", allow_null=True,
        help_text="An emergency activation: the governance admin who asked for it (changed_by confirmed it).")

    class Meta:
        model = PolicyVersion
        ref_name = "PolicyVersion"
        fields = ["id", "policy_name", "version", "action", "changed_by", "changed_at", "old_values", "new_values",
                  "draft", "eval_run_id", "emergency_reason", "emergency_requested_by"]


@extend_schema_view(get=extend_schema(operation_id="policies_history_list", summary="A policy's history, newest first"))
class PolicyHistoryApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = PolicyVersionOutputSerializer
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return PolicyVersion.objects.none()
        policy = self.get_policy()
        return PolicyVersion.objects.filter(policy=policy).select_related("changed_by", "emergency_requested_by")

    def get_policy(self) -> Policy:
        return get_object_or_404(Policy, pk=self.kwargs["policy_id"])
