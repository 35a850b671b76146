"""The run API: start, read, trace, cancel. Thin views over services (approvals: runs.approvals_api)."""

import django_filters
from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from governance import redaction
from governance.auth import ApiTokenAuthentication
from core.api_errors import Forbidden
from core.filters import UtcIsoDateTimeFilter
from core.api_fields import StrictSerializer, has_text
from core.permissions import CanStartRuns
from runs import outcome_refusals, selectors, services
from runs.idempotency import idempotent
from runs.model_answer import model_answer
from runs.models import Run, RunEvent
from runs.throttles import PostThrottle


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 128}, OpenApiParameter.HEADER,
    description="Makes the request safe to retry: the same key and body get the stored response.",
)


SECRETS = ("api_keys", "card_numbers")


def _redacted(value, kinds):
    return redaction.redact(value, kinds=kinds, secrets=redaction.env_secrets())


class PendingApprovalSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["tool_call", "budget"], help_text="budget: the run waits for more budget "
                                   "(awaiting_budget); its tool is empty and `budget` says what ran out.")
    budget = serializers.JSONField(help_text='For kind budget: {"kind", "used", "limit", "asked"}; else {}.')
    tool = serializers.CharField()
    arguments = serializers.JSONField()
    approver_role = serializers.CharField(source="approver_role.name")
    expires_at = serializers.DateTimeField()


class UsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    tokens_estimated = serializers.BooleanField()
    llm_calls = serializers.IntegerField()
    tool_calls = serializers.IntegerField()


class AnsweredBySerializer(serializers.Serializer):
    profile = serializers.CharField(help_text="The model profile that answered.")
    backend = serializers.CharField()
    model = serializers.CharField(help_text="The model as the server named it in its reply.")


class RunRefusedSerializer(serializers.Serializer):
    count = serializers.IntegerField(source="refused_count", help_text="Actions the run set out to take and was refused.")
    kinds = serializers.ListField(
        source="refused_kinds", child=serializers.ChoiceField(choices=outcome_refusals.KINDS),
        help_text="Their kinds, sorted, each once: denied, expired (an approval that expired counts as denied), "
                  "refused_at_call (refused when it was to run: a grant revoked, a tool held), tool_cap, budget_denied.")


class RunOutputSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.slug")
    agent_version = serializers.IntegerField(source="agent_version.version")
    caller = serializers.CharField(source="caller.username")
    stop_reason = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    error_message = serializers.CharField(allow_null=True)
    usage = serializers.SerializerMethodField()
    pending_approval = serializers.SerializerMethodField()
    receipt_id = serializers.SerializerMethodField()
    model_profile = serializers.SerializerMethodField()
    answered_by = serializers.SerializerMethodField()
    fell_back = serializers.SerializerMethodField()
    fallback_calls = serializers.SerializerMethodField()
    refused = RunRefusedSerializer(source="*", help_text="What the run was refused; a succeeded run with any did not do "
                                                         "all it set out to do. The receipt lists each with why.")

    class Meta:
        model = Run
        fields = [
            "id", "agent", "agent_version", "caller", "status", "stop_reason", "error", "error_message", "tainted",
            "input", "output", "created_at", "started_at", "finished_at", "usage", "pending_approval", "receipt_id",
            "model_profile", "answered_by", "fell_back", "fallback_calls", "refused",
        ]

    def to_representation(self, run: Run) -> dict:
        data = super().to_representation(run)
        for name in ("stop_reason", "error", "error_message"):
            data[name] = data[name] or None
        request = self.context.get("request")
        if request is None or request.user.pk != run.caller_id:
            # Another role (compliance) reads the run redacted; only its caller sees their own words.
            for name in ("input", "output", "error_message"):
                data[name] = _redacted(data[name], settings.WARRANT["REDACT"])
            if data["pending_approval"]:
                data["pending_approval"]["arguments"] = _redacted(data["pending_approval"]["arguments"], SECRETS)
        return data

    @extend_schema_field(UsageSerializer)
    def get_usage(self, run: Run) -> dict:
        # Estimated when any call's counts were (the scripted model, a server that reported none).
        estimated = any(call.get("tokens_estimated", True) for call in run.state.get("model_calls", []))
        return {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "tokens_estimated": estimated,
                "llm_calls": run.llm_calls, "tool_calls": run.tool_calls}

    @extend_schema_field(serializers.CharField(help_text="The model profile the run's agent version names."))
    def get_model_profile(self, run: Run) -> str:
        return model_answer(run)["requested_profile"]

    @extend_schema_field(AnsweredBySerializer(allow_null=True))
    def get_answered_by(self, run: Run) -> dict | None:
        """The profile, backend and model that answered the run's last model call; null before any was answered."""
        return model_answer(run)["answered_by"]

    @extend_schema_field(serializers.BooleanField(
        help_text="True when a fallback profile, not the requested one, answered any of the run's model calls."))
    def get_fell_back(self, run: Run) -> bool:
        return model_answer(run)["fell_back"]

    @extend_schema_field(serializers.IntegerField(help_text="How many of the run's model calls a fallback answered."))
    def get_fallback_calls(self, run: Run) -> int:
        return model_answer(run)["fallback_calls"]

    @extend_schema_field(PendingApprovalSerializer(allow_null=True))
    def get_pending_approval(self, run: Run) -> dict | None:
        approval = selectors.pending_approval(run)
        return PendingApprovalSerializer(approval).data if approval else None

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_receipt_id(self, run: Run) -> str | None:
        receipt = getattr(run, "receipt", None) if run.is_terminal else None
        return str(receipt.id) if receipt else None


class RunFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Run._meta.get_field("status").choices)
    agent = django_filters.CharFilter(field_name="agent__slug")
    caller = django_filters.CharFilter(field_name="caller__username")
    created_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    refused = django_filters.BooleanFilter(method="filter_refused",
                                           label="Runs with (true) or without (false) a refused action.")
    refused_kind = django_filters.ChoiceFilter(choices=[(k, k) for k in outcome_refusals.KINDS],
                                               method=outcome_refusals.filter_refused_kind,
                                               label="Runs refused an action of this kind.")

    class Meta:
        model = Run
        fields = ["status", "agent", "caller", "created_after", "created_before", "refused", "refused_kind"]

    def filter_refused(self, queryset, name: str, value: bool):
        # A method of the filter set, so the schema reads the parameter as the boolean it is.
        return outcome_refusals.filter_refused(queryset, name, value)


class RunListCreateApi(ListAPIView):
    """List the runs you may see; start a run (operators)."""

    class RunStartInputSerializer(StrictSerializer):
        agent = serializers.SlugField(max_length=64)
        input = serializers.CharField(max_length=services.MAX_INPUT_CHARS, trim_whitespace=False, validators=[has_text])
        idempotency_key = serializers.CharField(max_length=128, required=False)

    serializer_class = RunOutputSerializer
    filterset_class = RunFilter
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    throttle_classes = [PostThrottle]
    throttle_scope = "run_create"

    def get_permissions(self):
        return [CanStartRuns()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return selectors.runs_visible_to(self.request.user)

    @extend_schema(operation_id="runs_list")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def answer_replay(self, request, stored: dict) -> Response:
        """The same key again: the same run, as it is now (200), not the answer of its start."""
        if "id" not in stored:
            return Response(stored)
        run = get_object_or_404(selectors.runs_visible_to(request.user), id=stored["id"])
        return Response(RunOutputSerializer(run, context={"request": request}).data, status=status.HTTP_200_OK)

    @extend_schema(operation_id="runs_create", request=RunStartInputSerializer,
                   parameters=[IDEMPOTENCY_KEY],
                   responses={201: RunOutputSerializer, 200: RunOutputSerializer})
    @idempotent(replay=answer_replay)
    def post(self, request):
        serializer = self.RunStartInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        # A retry under the same Idempotency-Key never gets here: @idempotent answers it.
        run, _ = services.run_start(agent_slug=data["agent"], input_text=data["input"], caller=request.user,
                                    governance_stamp=getattr(request, "governance_stamp", None))
        if settings.CELERY_TASK_ALWAYS_EAGER:
            # The embedded default's in-process task has already advanced the run: answer with
            # it as it is now. A queued run is what we wrote.
            run = selectors.runs_visible_to(request.user).get(id=run.id)
        return Response(RunOutputSerializer(run, context={"request": request}).data, status=status.HTTP_201_CREATED)


class RunDetailApi(GenericAPIView):
    serializer_class = RunOutputSerializer

    @extend_schema(operation_id="runs_retrieve")
    def get(self, request, run_id):
        # A read changes nothing: overdue requests and lost runs are the reconciler's (runs.reconcile).
        run = get_object_or_404(selectors.runs_visible_to(request.user), id=run_id)
        return Response(RunOutputSerializer(run, context={"request": request}).data)


class RunEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["seq", "step", "kind", "data", "created_at"]


class RunEventsApi(ListAPIView):
    """The run's trace, in order."""

    serializer_class = RunEventSerializer
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return RunEvent.objects.none()
        run = get_object_or_404(selectors.runs_visible_to(self.request.user), id=self.kwargs["run_id"])
        return RunEvent.objects.filter(run=run).order_by("seq")


class RunCancelApi(GenericAPIView):
    serializer_class = RunOutputSerializer

    @extend_schema(operation_id="runs_cancel", request=None, responses={200: RunOutputSerializer})
    def post(self, request, run_id):
        # Only the caller cancels a run. Who cannot see it gets 404; who can (compliance) gets 403.
        run = get_object_or_404(selectors.runs_visible_to(request.user), id=run_id)
        if run.caller_id != request.user.pk:
            raise Forbidden("only the run's caller may cancel it")
        run = services.run_cancel(run=run, user=request.user)
        run = selectors.runs_visible_to(request.user).get(id=run.id)
        return Response(RunOutputSerializer(run, context={"request": request}).data)
