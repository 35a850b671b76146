"""Standing approvals over the API: list, grant, read, revoke. Thin views over runs.standing."""

import django_filters
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView, RetrieveAPIView
from rest_framework.response import Response

from core.api_fields import StrictSerializer, has_text
from governance.tokens import auth_via
from runs import standing
from runs.api import IDEMPOTENCY_KEY
from runs.idempotency import idempotent
from runs.models import StandingApproval
from runs.throttles import PostThrottle

PATTERN_HELP = ('Per argument of the call, {"equals": value} or {"in": [value, ...]} (1 to 100 values). Every '
                "argument of a call must be named here, and every one named here must be in the call; values "
                "are compared exactly, as JSON (one character different is no match).")


class StandingApprovalSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.slug", allow_null=True, default=None,
                                  help_text="The agent it covers; null: every agent.")
    role = serializers.CharField(source="role.name", help_text="The approver role it stands in for.")
    granted_by = serializers.CharField(source="granted_by.username")
    granted_via = serializers.CharField(help_text="How the granter authenticated: 'session', or 'token:' and the "
                                                  "token's public id.")
    revoked_by = serializers.CharField(source="revoked_by.username", allow_null=True, default=None)
    arguments = serializers.JSONField(help_text=PATTERN_HELP)
    state = serializers.SerializerMethodField(help_text="active, expired or revoked.")
    uses = serializers.IntegerField(help_text="Calls it has answered so far.")

    class Meta:
        model = StandingApproval
        fields = ["id", "tool", "agent", "arguments", "role", "reason", "granted_by", "granted_via", "created_at",
                  "expires_at", "state", "revoked_at", "revoked_by", "revoke_reason", "uses"]

    @extend_schema_field(serializers.ChoiceField(choices=["active", "expired", "revoked"]))
    def get_state(self, obj: StandingApproval) -> str:
        return standing.standing_state(obj)


class StandingApprovalFilter(django_filters.FilterSet):
    tool = django_filters.CharFilter()
    role = django_filters.CharFilter(field_name="role__name")
    agent = django_filters.CharFilter(field_name="agent__slug")
    active = django_filters.BooleanFilter(method="filter_active", label="Only those neither revoked nor expired.")

    class Meta:
        model = StandingApproval
        fields = ["tool", "role", "agent", "active"]

    def filter_active(self, queryset, name, value):
        live = {"revoked_at__isnull": True, "expires_at__gt": timezone.now()}
        return queryset.filter(**live) if value else queryset.exclude(**live)


class StandingGrantInputSerializer(StrictSerializer):
    tool = serializers.CharField(max_length=64)
    agent = serializers.SlugField(max_length=64, required=False, allow_null=True, default=None,
                                  help_text="Omitted or null: every agent.")
    arguments = serializers.DictField(child=serializers.DictField(), help_text=PATTERN_HELP)
    role = serializers.CharField(max_length=150, help_text="Your role whose tool-approval policy asks about the tool.")
    reason = serializers.CharField(max_length=2000, trim_whitespace=False, validators=[has_text])
    expires_at = serializers.DateTimeField(help_text=f"At most {standing.MAX_PERIOD.days} days from now.")
    idempotency_key = serializers.CharField(max_length=128, required=False)


class StandingRevokeInputSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    idempotency_key = serializers.CharField(max_length=128, required=False)


def _visible(request):
    return standing.standing_visible_to(request.user).order_by("-created_at", "id")


class StandingApprovalListCreateApi(ListAPIView):
    """Standing approvals of your roles, newest first (compliance and superusers see all); grant one."""

    serializer_class = StandingApprovalSerializer
    filterset_class = StandingApprovalFilter
    throttle_classes = [PostThrottle]
    throttle_scope = "approval_decide"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return StandingApproval.objects.none()
        return _visible(self.request)

    @extend_schema(operation_id="standing_approvals_list")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="standing_approvals_create", request=StandingGrantInputSerializer, parameters=[IDEMPOTENCY_KEY],
        responses={201: StandingApprovalSerializer},
        description="Grant, as a member of `role`, that `tool` with arguments matching `arguments` runs without "
                    "asking `role` again, until `expires_at` or a revocation. Refused (403) outside the role's "
                    "authority: you are not in the role, or no enabled tool-approval policy asks it about the "
                    "tool (and agent). Refused (400) when every such policy needs more than one approver. It "
                    "never answers a call of a run you started, nor one in a tainted run.")
    @idempotent
    def post(self, request):
        serializer = StandingGrantInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        granted = standing.standing_grant(
            user=request.user, tool=data["tool"], agent=data["agent"], arguments=data["arguments"], role=data["role"],
            reason=data["reason"], expires_at=data["expires_at"], via=auth_via(request))
        found = _visible(request).get(pk=granted.pk)
        return Response(StandingApprovalSerializer(found).data, status=status.HTTP_201_CREATED)


class StandingApprovalDetailApi(RetrieveAPIView):
    """One standing approval, with how many calls it answered."""

    serializer_class = StandingApprovalSerializer
    lookup_url_kwarg = "standing_id"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return StandingApproval.objects.none()
        return _visible(self.request)


class StandingApprovalRevokeApi(GenericAPIView):
    """Revoke: its granter, a member of its role, or a superuser. The next call it would answer asks people."""

    serializer_class = StandingApprovalSerializer
    throttle_classes = [PostThrottle]
    throttle_scope = "approval_decide"

    @extend_schema(request=StandingRevokeInputSerializer, responses={200: StandingApprovalSerializer},
                   parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request, standing_id):
        serializer = StandingRevokeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        get_object_or_404(_visible(request), pk=standing_id)
        standing.standing_revoke(standing_id=standing_id, user=request.user,
                                 reason=serializer.validated_data["reason"])
        return Response(StandingApprovalSerializer(_visible(request).get(pk=standing_id)).data)
