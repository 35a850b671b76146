"""The approvals API: list and read requests, approve and deny. Thin views over runs.approvals.

A request may need more than one approval (`quorum`): each approval is recorded as a decision
(`decisions`), the request stays pending until `approvals_count` reaches the quorum, and the
first denial closes it. A request not decided in time may have escalated to another role
(`escalated_from_role`, `escalated_at`): its first role still reads it, and no longer decides it.
"""

import django_filters
from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import GenericAPIView, ListAPIView, RetrieveAPIView
from rest_framework.response import Response

from core.api_fields import StrictSerializer
from core.api_views import errors
from governance.tokens import auth_via
from runs import provenance, selectors, services
from runs.api import IDEMPOTENCY_KEY, SECRETS, _redacted
from runs.idempotency import idempotent
from runs.models import ApprovalDecision, ApprovalRequest
from runs.throttles import PostThrottle


class ApprovalDecisionSerializer(serializers.ModelSerializer):
    """One person's decision: they decide a request once."""

    user = serializers.CharField(source="username", help_text="The decider, as their username was at the time.")
    role = serializers.CharField(help_text="The role they decided as.")
    via = serializers.CharField(help_text="How they authenticated: 'session', or 'token:' and the token's public id.")
    at = serializers.DateTimeField(source="created_at")

    class Meta:
        model = ApprovalDecision
        fields = ["user", "role", "decision", "reason", "via", "at"]


class ApprovalOutputSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.id")
    agent = serializers.CharField(source="run.agent.slug")
    caller = serializers.CharField(source="run.caller.username")
    approver_role = serializers.CharField(source="approver_role.name", help_text="The role that decides it now.")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None,
                                       help_text="Who closed it: the approval that reached the quorum, or the denial.")
    decided_via = serializers.CharField(
        help_text="How the decider authenticated: 'session', or 'token:' and the token's public id; empty until decided.")
    quorum = serializers.IntegerField(help_text="Approvals needed, each from a different member of the role.")
    approvals_count = serializers.IntegerField(
        help_text="Approvals counted so far (by the current role: an escalation starts the count again).")
    decisions = ApprovalDecisionSerializer(many=True, read_only=True,
                                           help_text="Every decision taken on it, oldest first (append-only).")
    escalate_to_role = serializers.CharField(source="escalate_to_role.name", allow_null=True, default=None,
                                             help_text="The role it moves to if not decided by escalate_at.")
    escalated_from_role = serializers.CharField(source="escalated_from_role.name", allow_null=True, default=None,
                                                help_text="The role it came from, once it escalated.")
    run_tainted = serializers.BooleanField(source="run.tainted")
    run_taint_reasons = serializers.SerializerMethodField(
        help_text="Why the run is tainted: where untrusted or instruction-like text came in, and what it matched.")
    arguments_provenance = serializers.SerializerMethodField(
        help_text="For each argument (a path such as 'to' or 'items[0].url'): whether its value, or an address or "
                  "URL in it, appeared in untrusted text the run read, and where (origin, tool, call_id, excerpt, "
                  "compared as a reader sees it: `exactly` is false for a look-alike); `flags` say why an address "
                  "or URL in it is not what it looks like, and `spelled_out` shows its non-ASCII characters.")

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "run_id", "agent", "caller", "kind", "budget", "tool", "arguments", "arguments_sha256", "policy_name",
            "policy_version", "approver_role", "reasons", "model_rationale", "run_tainted", "run_taint_reasons",
            "arguments_provenance", "status", "quorum", "approvals_count", "decisions", "decided_by", "decided_at",
            "decided_via", "reason", "escalate_to_role", "escalate_at", "escalated_from_role", "escalated_at",
            "expires_at", "created_at",
        ]

    def to_representation(self, approval: ApprovalRequest) -> dict:
        data = super().to_representation(approval)
        # Approvers are never the run's caller. They see recipients and amounts (what they decide
        # on) but not secrets: the reasons say one is there, and the digest binds the real value.
        data["arguments"] = _redacted(data["arguments"], SECRETS)
        data["model_rationale"] = _redacted(data["model_rationale"], settings.WARRANT["REDACT"])
        return data

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_arguments_provenance(self, approval: ApprovalRequest) -> list[dict]:
        return provenance.of_approval(approval)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_run_taint_reasons(self, approval: ApprovalRequest) -> list[str]:
        return [line for line in approval.run.taint_reason.splitlines() if line]


class ApprovalFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=ApprovalRequest.Status.choices)
    role = django_filters.CharFilter(field_name="approver_role__name", label="The role that decides it now.")
    escalated = django_filters.BooleanFilter(field_name="escalated_at", lookup_expr="isnull", exclude=True,
                                             label="Requests that escalated (true) or did not (false).")

    class Meta:
        model = ApprovalRequest
        fields = ["status", "role", "escalated"]


def _approvals(request):
    return selectors.approvals_visible_to(request.user).select_related("escalate_to_role")


class ApprovalListApi(ListAPIView):
    """Approval requests for your roles (and those escalated away from them), oldest first
    (compliance sees all)."""

    serializer_class = ApprovalOutputSerializer
    filterset_class = ApprovalFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApprovalRequest.objects.none()
        return _approvals(self.request).order_by("created_at", "id")


@extend_schema_view(get=extend_schema(operation_id="approvals_retrieve", summary="Read one approval request",
                                      responses={200: ApprovalOutputSerializer, **errors(404)}))
class ApprovalDetailApi(RetrieveAPIView):
    """One request with every decision taken on it: what a notification or a colleague links to."""

    serializer_class = ApprovalOutputSerializer
    lookup_url_kwarg = "approval_id"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApprovalRequest.objects.none()
        return _approvals(self.request)


class ApprovalDecideApi(GenericAPIView):
    approve = True
    serializer_class = ApprovalOutputSerializer
    throttle_classes = [PostThrottle]
    throttle_scope = "approval_decide"

    class ApprovalDecisionInputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
        idempotency_key = serializers.CharField(max_length=128, required=False)

    @extend_schema(request=ApprovalDecisionInputSerializer,
                   responses={200: ApprovalOutputSerializer, **errors(400, 403, 404, 409)}, parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request, approval_id):
        serializer = self.get_input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        approval = get_object_or_404(selectors.approvals_visible_to(request.user), id=approval_id)
        approval = services.approval_decide(
            approval_id=approval.id, user=request.user, approve=self.approve, reason=serializer.validated_data["reason"],
            via=auth_via(request),
        )
        approval = _approvals(request).get(id=approval.id)
        return Response(ApprovalOutputSerializer(approval).data)

    def get_input_serializer(self, **kwargs):
        return self.ApprovalDecisionInputSerializer(**kwargs)


class ApprovalApproveApi(ApprovalDecideApi):
    """Approve. With a quorum of one, or as the approval that reaches the quorum, the parked call
    runs once, with exactly the approved arguments; short of it, the request stays pending for
    other members of the role. Each person approves a request once (409 for a second decision)."""

    approve = True


class ApprovalDenialInputSerializer(StrictSerializer):
    reason = serializers.CharField(
        max_length=2000, help_text="Why; kept on the request and in the run's trace, which its caller reads.",
        error_messages={"required": services.DENIAL_NEEDS_A_REASON, "blank": services.DENIAL_NEEDS_A_REASON})
    idempotency_key = serializers.CharField(max_length=128, required=False)


@extend_schema_view(post=extend_schema(request=ApprovalDenialInputSerializer))
class ApprovalDenyApi(ApprovalDecideApi):
    """Deny: the model is told the call was denied, and nothing runs, whatever approvals came
    before. A denial needs a reason. Someone who approved cannot then deny (409)."""

    approve = False

    def get_input_serializer(self, **kwargs):
        return ApprovalDenialInputSerializer(**kwargs)
