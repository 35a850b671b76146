"""The governance API: policies (+ history and the dry run), roles and tool grants.

Thin views over services and selectors. Reads are open to anyone with a role, writes to
governance admins (see core.permissions). Every input serializer is strict: a body that
carries a field the operation does not accept is refused, never silently ignored.
"""


import django_filters
from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Count, ProtectedError, Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from agents.models import Agent, Tool
from governance import engine, services
from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.api_errors import Conflict, Unprocessable
from governance.evaluation import MAX_EVALUATE_INPUT_CHARS, policy_evaluate
from governance.models import MatchMode, Policy, PolicyType, PolicyVersion, ToolGrant
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin


class PolicyError(Unprocessable):
    """A stored policy cannot be evaluated: what a run would fail closed on."""

    code = "policy_error"


def _refuse_duplicate_policy_name(name: str | None, *, exclude_pk: int | None = None) -> None:
    if name and Policy.objects.filter(name=name).exclude(pk=exclude_pk).exists():
        raise Conflict(f"a policy named {name!r} already exists", details={"name": name})


# --- policies ---------------------------------------------------------------------------


class PolicyOutputSerializer(serializers.ModelSerializer):
    agents = serializers.SlugRelatedField(many=True, read_only=True, slug_field="slug")
    approver_role = serializers.SlugRelatedField(read_only=True, slug_field="name", allow_null=True)
    keywords = serializers.ListField(child=serializers.CharField())
    target_tools = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Policy
        ref_name = "Policy"
        fields = [
            "id", "name", "type", "description", "enabled", "priority", "agents", "keywords", "match_mode", "regex",
            "target_tools", "content", "response", "approver_role", "approval_ttl_seconds", "version",
            "created_at", "updated_at",
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

    class Meta:
        ref_name = "PolicyInput"


def _policies():
    return Policy.objects.select_related("approver_role").prefetch_related("agents")


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
        operation_id="policies_create", summary="Create a policy (version 1, written to history)",
        request=PolicyInputSerializer, responses={201: PolicyOutputSerializer, **errors(400, 403, 409)},
    )
    def post(self, request):
        serializer = PolicyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        _refuse_duplicate_policy_name(serializer.validated_data["name"])
        policy = services.policy_create(values=serializer.validated_data, user=request.user)
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
        request=PolicyInputSerializer, responses={200: PolicyOutputSerializer, **errors(400, 403, 404, 409)},
    )
    def patch(self, request, policy_id):
        policy = self.get_object()
        serializer = PolicyInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        _refuse_duplicate_policy_name(serializer.validated_data.get("name"), exclude_pk=policy.pk)
        policy = services.policy_update(policy=policy, values=serializer.validated_data, user=request.user)
        return Response(PolicyOutputSerializer(_policies().get(pk=policy.pk)).data)

    @extend_schema(operation_id="policies_destroy", summary="Delete a policy (its history stays)", responses={204: None, **errors(403, 404)})
    def delete(self, request, policy_id):
        services.policy_delete(policy=self.get_object(), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyVersionOutputSerializer(serializers.ModelSerializer):
    changed_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)

    class Meta:
        model = PolicyVersion
        ref_name = "PolicyVersion"
        fields = ["id", "policy_name", "version", "action", "changed_by", "changed_at", "old_values", "new_values"]


@extend_schema_view(get=extend_schema(operation_id="policies_history_list", summary="A policy's history, newest first"))
class PolicyHistoryApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = PolicyVersionOutputSerializer
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return PolicyVersion.objects.none()
        policy = self.get_policy()
        return PolicyVersion.objects.filter(policy=policy).select_related("changed_by")

    def get_policy(self) -> Policy:
        return get_object_or_404(Policy, pk=self.kwargs["policy_id"])


# --- the dry run ------------------------------------------------------------------------


class DecisionSerializer(serializers.Serializer):
    policy_id = serializers.IntegerField()
    policy = serializers.CharField()
    version = serializers.IntegerField()
    type = serializers.CharField()
    matched = serializers.ListField(child=serializers.CharField())
    quoted = serializers.ListField(
        child=serializers.CharField(trim_whitespace=False), default=list,
        help_text="The words of the input that fired it, as sent (matching reads through lookalike and "
                  "invisible characters; this is what was actually written).")

    class Meta:
        ref_name = "PolicyDecision"


class GuardDecisionSerializer(DecisionSerializer):
    response = serializers.CharField()

    class Meta:
        ref_name = "PolicyGuardDecision"


class ContentDecisionSerializer(DecisionSerializer):
    content = serializers.CharField()

    class Meta:
        ref_name = "PolicyContentDecision"


class ApprovalDecisionSerializer(serializers.Serializer):
    """Who would have to approve a call; `policy*` are null when the tainted-run rule demands it."""

    policy_id = serializers.IntegerField(allow_null=True)
    policy = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    type = serializers.CharField(allow_null=True)
    matched = serializers.ListField(child=serializers.CharField())
    approver_role = serializers.CharField()
    reason = serializers.CharField()

    class Meta:
        ref_name = "PolicyApprovalDecision"


class EvaluatedToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    side_effect = serializers.BooleanField()
    guides = ContentDecisionSerializer(many=True)
    needs_approval = serializers.BooleanField()
    approval = ApprovalDecisionSerializer(allow_null=True)
    result_taints_run = serializers.BooleanField(
        help_text="Its source is not marked trusted: once a run reads its result, every side-effect call waits for a human.")

    class Meta:
        ref_name = "PolicyEvaluatedTool"


class EvaluatedAgentSerializer(serializers.Serializer):
    slug = serializers.CharField()
    version = serializers.IntegerField()

    class Meta:
        ref_name = "PolicyEvaluatedAgent"


class PolicyEvaluateApi(GenericAPIView):
    """Dry run of the policies for an input: a run is never started, nothing is written.

    An intent guard that matches would end the run before planning; the other decisions are
    reported anyway so the whole picture is visible. A policy that cannot be evaluated answers
    422 with code `policy_error`, naming it: a run would fail closed on it.
    """

    permission_classes = [IsGovernanceAdmin]

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        agent = serializers.SlugField(max_length=64, required=False, allow_null=True)
        input = serializers.CharField(max_length=MAX_EVALUATE_INPUT_CHARS, trim_whitespace=False)
        role = serializers.CharField(max_length=150, required=False, allow_null=True)

        class Meta:
            ref_name = "PolicyEvaluateInput"

        def validate_agent(self, value):
            if value is None:
                return None
            agent = Agent.objects.filter(slug=value).first()
            if agent is None:
                raise serializers.ValidationError(f"no agent named {value!r}")
            if agent.current_version is None:
                raise serializers.ValidationError(f"agent {value!r} has no published version")
            return agent

        def validate_role(self, value):
            if value is not None and not Group.objects.filter(name=value).exists():
                raise serializers.ValidationError(f"no role named {value!r}")
            return value

    class OutputSerializer(serializers.Serializer):
        agent = EvaluatedAgentSerializer(allow_null=True)
        role = serializers.CharField(allow_null=True)
        policy_snapshot_sha256 = serializers.CharField()
        blocked = serializers.BooleanField()
        intent_guard = GuardDecisionSerializer(allow_null=True)
        tainted = serializers.ListField(child=serializers.CharField(), help_text="Instruction-like patterns in the input.")
        playbooks = ContentDecisionSerializer(many=True)
        output_formatter = ContentDecisionSerializer(allow_null=True)
        tools = EvaluatedToolSerializer(many=True, help_text="What the model would be shown, with guides and approvals.")

        class Meta:
            ref_name = "PolicyEvaluation"

    serializer_class = InputSerializer

    @extend_schema(
        operation_id="policies_evaluate", summary="Dry-run the policies for an input",
        request=InputSerializer, responses={200: OutputSerializer, **errors(400, 403, 422)},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            result = policy_evaluate(agent=data.get("agent"), role=data.get("role"), text=data["input"])
        except engine.PolicyEvaluationError as exc:
            raise PolicyError(str(exc), details={"policy": exc.policy, "reason": exc.reason}) from None
        return Response(self.OutputSerializer(result).data)


# --- roles ------------------------------------------------------------------------------

ROLE_NAME_PATTERN = r"^[\w.@+-]+( [\w.@+-]+)*$"
ROLE_NAME_RULE = "Use letters, digits, single spaces and . @ + - _ only."


def _roles():
    return (
        Group.objects.annotate(members=Count("user", distinct=True))
        .prefetch_related("tool_grants__tool", "approval_policies")
        .order_by("name")
    )


class RoleOutputSerializer(serializers.ModelSerializer):
    members = serializers.IntegerField(read_only=True, help_text="How many users hold the role.")
    tools = serializers.SerializerMethodField(help_text="Tools granted to the role.")
    approves = serializers.SerializerMethodField(help_text="Policies whose calls members of the role approve.")

    class Meta:
        model = Group
        ref_name = "Role"
        fields = ["name", "members", "tools", "approves"]

    def get_tools(self, role: Group) -> list[str]:
        return sorted(grant.tool.name for grant in role.tool_grants.all())

    def get_approves(self, role: Group) -> list[str]:
        return sorted(policy.name for policy in role.approval_policies.all())


@extend_schema_view(get=extend_schema(operation_id="roles_list", summary="List roles"))
class RoleListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = RoleOutputSerializer

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        read_only_names = frozenset({"id", "members", "tools", "approves"})
        # A RegexField, so that the schema states the rule too.
        name = serializers.RegexField(ROLE_NAME_PATTERN, max_length=150, error_messages={"invalid": ROLE_NAME_RULE})

        class Meta:
            ref_name = "RoleInput"

    def get_queryset(self):
        return _roles()

    @extend_schema(
        operation_id="roles_create", summary="Create a role",
        request=InputSerializer, responses={201: RoleOutputSerializer, **errors(400, 403, 409)},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        name = serializer.validated_data["name"]
        if Group.objects.filter(name=name).exists():
            raise Conflict(f"a role named {name!r} already exists", details={"name": name})
        Group.objects.create(name=name)
        return Response(RoleOutputSerializer(_roles().get(name=name)).data, status=status.HTTP_201_CREATED)


class RoleDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = RoleOutputSerializer
    lookup_field = lookup_url_kwarg = "name"

    def get_queryset(self):
        return _roles()

    @extend_schema(operation_id="roles_retrieve", summary="Read a role", responses={200: RoleOutputSerializer, **errors(403, 404)})
    def get(self, request, name):
        return Response(RoleOutputSerializer(self.get_object()).data)

    @extend_schema(
        operation_id="roles_destroy", summary="Delete a role (refused while a policy or request names it)",
        responses={204: None, **errors(403, 404, 409)},
    )
    def delete(self, request, name):
        role = self.get_object()
        if role.name == settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]:
            raise Conflict("the governance admin role cannot be deleted", details={"role": role.name})
        approves = sorted(p.name for p in role.approval_policies.all())
        if approves:
            raise Conflict(f"role {role.name!r} approves for policies; change them first",
                           details={"role": role.name, "policies": approves})
        try:
            role.delete()
        except ProtectedError as exc:
            # Approval requests (past or pending) name the role: deleting it would orphan the record.
            raise Conflict(f"role {role.name!r} is referenced by {len(exc.protected_objects)} record(s)",
                           details={"role": role.name}) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- tool grants ------------------------------------------------------------------------


class GrantOutputSerializer(serializers.ModelSerializer):
    role = serializers.SlugRelatedField(read_only=True, slug_field="name")
    tool = serializers.SlugRelatedField(read_only=True, slug_field="name")
    granted_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)

    class Meta:
        model = ToolGrant
        ref_name = "ToolGrant"
        fields = ["id", "role", "tool", "granted_by", "granted_at"]


class GrantFilter(django_filters.FilterSet):
    role = django_filters.CharFilter(field_name="role__name", label="Role name.")
    tool = django_filters.CharFilter(field_name="tool__name", label="Tool name.")

    class Meta:
        model = ToolGrant
        fields = ["role", "tool"]


def _grants():
    return ToolGrant.objects.select_related("role", "tool", "granted_by")


@extend_schema_view(get=extend_schema(operation_id="grants_list", summary="List tool grants"))
class GrantListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = GrantOutputSerializer
    filterset_class = GrantFilter

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        read_only_names = frozenset({"id", "granted_by", "granted_at"})
        role = serializers.SlugRelatedField(slug_field="name", queryset=Group.objects.all())
        tool = serializers.SlugRelatedField(slug_field="name", queryset=Tool.objects.all())

        class Meta:
            ref_name = "ToolGrantInput"

    def get_queryset(self):
        return _grants()

    @extend_schema(
        operation_id="grants_create", summary="Let a role use a tool",
        request=InputSerializer, responses={201: GrantOutputSerializer, **errors(400, 403, 409)},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        role, tool = serializer.validated_data["role"], serializer.validated_data["tool"]
        if ToolGrant.objects.filter(role=role, tool=tool).exists():
            raise Conflict(f"role {role.name!r} may already use {tool.name!r}", details={"role": role.name, "tool": tool.name})
        grant = services.grant_create(role=role, tool=tool, user=request.user)
        return Response(GrantOutputSerializer(_grants().get(pk=grant.pk)).data, status=status.HTTP_201_CREATED)


class GrantDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = GrantOutputSerializer
    lookup_url_kwarg = "grant_id"

    def get_queryset(self):
        return _grants()

    @extend_schema(operation_id="grants_retrieve", summary="Read a tool grant", responses={200: GrantOutputSerializer, **errors(403, 404)})
    def get(self, request, grant_id):
        return Response(GrantOutputSerializer(self.get_object()).data)

    @extend_schema(operation_id="grants_destroy", summary="Revoke a tool grant (bites running runs at their next call)",
                   responses={204: None, **errors(403, 404)})
    def delete(self, request, grant_id):
        grant = self.get_object()
        services.grant_delete(role=grant.role, tool=grant.tool)
        return Response(status=status.HTTP_204_NO_CONTENT)
