"""The triggers API: triggers and their fires (governance admins write, anyone with a role reads),
and the webhook endpoint senders call (authenticated by its signature, not by a token).
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import error_body
from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin
from triggers import selectors, services, webhooks
from triggers.models import Trigger, TriggerFire


class TriggerOutputSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    service_account = serializers.SerializerMethodField(help_text="The username its runs have as their caller.")
    hook_url = serializers.SerializerMethodField(help_text="Where a webhook trigger's sender POSTs.")
    stats = serializers.SerializerMethodField(help_text="Its last fires: runs started, succeeded, success rate.")

    class Meta:
        model = Trigger
        ref_name = "Trigger"
        fields = ["name", "description", "kind", "agent", "input_template", "service_account", "enabled",
                  "paused_at", "concurrency", "cron", "interval_seconds", "timezone", "missed", "last_fire_at",
                  "payload_schema", "max_payload_bytes", "replay_window_seconds", "secret_rotated_at", "hook_url",
                  "stats", "created_at", "updated_at"]

    def get_service_account(self, trigger: Trigger) -> str:
        return trigger.service_account.user.get_username()

    def get_hook_url(self, trigger: Trigger) -> str | None:
        return f"/api/v1/hooks/{trigger.name}/" if trigger.kind == Trigger.Kind.WEBHOOK else None

    def get_stats(self, trigger: Trigger) -> dict:
        return selectors.stats_of(trigger)


class TriggerCreatedSerializer(TriggerOutputSerializer):
    secret = serializers.CharField(read_only=True, allow_null=True,
                                   help_text="The webhook secret: shown in this answer only (null for a schedule).")

    class Meta(TriggerOutputSerializer.Meta):
        ref_name = "TriggerCreated"
        fields = [*TriggerOutputSerializer.Meta.fields, "secret"]


class TriggerInputSerializer(StrictFieldsMixin, serializers.Serializer):
    read_only_names = frozenset({"enabled", "paused_at", "last_fire_at", "secret_rotated_at", "hook_url", "stats",
                                 "created_at", "updated_at", "secret"})
    name = serializers.SlugField(max_length=80)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    kind = serializers.ChoiceField(choices=Trigger.Kind.choices)
    agent = serializers.SlugField(max_length=80)
    input_template = serializers.CharField(max_length=20_000)
    service_account = serializers.CharField(max_length=150)
    concurrency = serializers.ChoiceField(choices=Trigger.Concurrency.choices, required=False)
    cron = serializers.CharField(required=False, allow_blank=True, max_length=120)
    interval_seconds = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=366 * 86400)
    timezone = serializers.CharField(required=False, max_length=64)
    missed = serializers.ChoiceField(choices=Trigger.Missed.choices, required=False)
    payload_schema = serializers.JSONField(required=False, allow_null=True)
    max_payload_bytes = serializers.IntegerField(required=False, min_value=1, max_value=services.MAX_PAYLOAD_LIMIT)
    replay_window_seconds = serializers.IntegerField(required=False, min_value=1,
                                                     max_value=services.MAX_REPLAY_WINDOW)

    class Meta:
        ref_name = "TriggerInput"


class TriggerPatchSerializer(TriggerInputSerializer):
    read_only_names = TriggerInputSerializer.read_only_names | {"name", "kind"}

    class Meta:
        ref_name = "TriggerPatch"

    def get_fields(self):
        fields = super().get_fields()
        for name in ("name", "kind"):
            fields.pop(name)
        for field in fields.values():
            field.required = False
        return fields


class TriggerFireSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run_id", read_only=True, allow_null=True)
    run_status = serializers.CharField(source="run.status", read_only=True, allow_null=True, default=None)

    class Meta:
        model = TriggerFire
        ref_name = "TriggerFire"
        fields = ["id", "kind", "delivery_id", "scheduled_for", "received_at", "payload_sha256", "outcome", "reason",
                  "run", "run_status", "started_at"]


@extend_schema_view(get=extend_schema(operation_id="triggers_list", summary="List triggers"))
class TriggerListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = TriggerOutputSerializer

    def get_queryset(self):
        return selectors.triggers()

    @extend_schema(operation_id="triggers_create", summary="Create a trigger",
                   description="A webhook trigger's answer carries its secret, shown this once.",
                   request=TriggerInputSerializer, responses={201: TriggerCreatedSerializer, **errors(400, 403, 409)})
    def post(self, request):
        serializer = TriggerInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        trigger, secret = services.trigger_create(by=request.user, **data)
        trigger = selectors.triggers().get(pk=trigger.pk)
        trigger.secret = secret or None
        return Response(TriggerCreatedSerializer(trigger).data, status=status.HTTP_201_CREATED)


class TriggerDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = TriggerOutputSerializer

    @extend_schema(operation_id="triggers_retrieve", summary="Read a trigger",
                   responses={200: TriggerOutputSerializer, **errors(403, 404)})
    def get(self, request, name):
        return Response(TriggerOutputSerializer(services.trigger_by_name(name)).data)

    @extend_schema(operation_id="triggers_partial_update", summary="Change a trigger",
                   request=TriggerPatchSerializer, responses={200: TriggerOutputSerializer, **errors(400, 403, 404)})
    def patch(self, request, name):
        trigger = services.trigger_by_name(name)
        serializer = TriggerPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        trigger = services.trigger_update(trigger, by=request.user, **serializer.validated_data)
        return Response(TriggerOutputSerializer(services.trigger_by_name(trigger.name)).data)


class _Action(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = TriggerOutputSerializer


class TriggerPauseApi(_Action):
    @extend_schema(operation_id="triggers_pause", summary="Pause a trigger", request=None,
                   description="No fire starts a run while paused; each is recorded as skipped.",
                   responses={200: TriggerOutputSerializer, **errors(403, 404)})
    def post(self, request, name):
        trigger = services.trigger_pause(services.trigger_by_name(name), by=request.user)
        return Response(TriggerOutputSerializer(services.trigger_by_name(trigger.name)).data)


class TriggerResumeApi(_Action):
    @extend_schema(operation_id="triggers_resume", summary="Resume a paused trigger", request=None,
                   responses={200: TriggerOutputSerializer, **errors(403, 404)})
    def post(self, request, name):
        trigger = services.trigger_resume(services.trigger_by_name(name), by=request.user)
        return Response(TriggerOutputSerializer(services.trigger_by_name(trigger.name)).data)


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(help_text="The new secret: shown in this answer only; the old one no longer verifies.")

    class Meta:
        ref_name = "TriggerSecret"


class TriggerRotateSecretApi(_Action):
    serializer_class = SecretSerializer

    @extend_schema(operation_id="triggers_rotate_secret", summary="Rotate a webhook trigger's secret", request=None,
                   responses={200: SecretSerializer, **errors(403, 404, 409)})
    def post(self, request, name):
        return Response({"secret": services.trigger_rotate_secret(services.trigger_by_name(name), by=request.user)})


@extend_schema_view(get=extend_schema(operation_id="triggers_fires_list", summary="A trigger's fires and their runs"))
class TriggerFireListApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = TriggerFireSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no name to look up
            return TriggerFire.objects.none()
        trigger = services.trigger_by_name(self.kwargs["name"])
        return TriggerFire.objects.filter(trigger=trigger).select_related("run").order_by("-received_at", "id")


class DeliveryAnswerSerializer(serializers.Serializer):
    fire = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=TriggerFire.Outcome.choices)
    reason = serializers.CharField()
    run = serializers.UUIDField(allow_null=True, help_text="The run it started; null when skipped or queued.")
    delivery_id = serializers.CharField()

    class Meta:
        ref_name = "WebhookDelivery"


class HookApi(APIView):
    """A sender's delivery: no token, the signature is the authentication (triggers.webhooks)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes: list = []  # the raw body is what is signed: read as bytes, never parsed first
    serializer_class = DeliveryAnswerSerializer

    @extend_schema(
        operation_id="hooks_deliver", summary="Deliver an event to a webhook trigger", request=OpenApiTypes.OBJECT,
        auth=[],
        description=("Signed with the trigger's secret: `X-Warrant-Signature: sha256=<hex HMAC-SHA256 of "
                     "'<X-Warrant-Timestamp>.<raw body>'>`. 202 with the fire and its run; 401 for a bad or "
                     "stale signature (nothing starts); 409 for a delivery id or signed message seen before; "
                     "413 past the trigger's size limit; 422 when the payload misses its schema."),
        parameters=[
            OpenApiParameter("X-Warrant-Timestamp", str, OpenApiParameter.HEADER, required=True,
                             description="Unix seconds when the sender signed; inside the replay window."),
            OpenApiParameter("X-Warrant-Signature", str, OpenApiParameter.HEADER, required=True,
                             description="sha256=<hex>"),
            OpenApiParameter("X-Warrant-Delivery", str, OpenApiParameter.HEADER,
                             description="The sender's id of this delivery, accepted once."),
        ],
        responses={202: DeliveryAnswerSerializer, **errors(400, 401, 404, 409, 413, 422)},
    )
    def post(self, request, trigger):
        try:
            fire = webhooks.receive(trigger, stream=request.stream, meta=request.META)
        except webhooks.BadSignature as exc:
            # A 401 names the scheme that would have been accepted (RFC 9110): a signature, not a token.
            return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code,
                            headers={"WWW-Authenticate": webhooks.CHALLENGE})
        return Response({"fire": fire.id, "outcome": fire.outcome, "reason": fire.reason, "run": fire.run_id,
                         "delivery_id": fire.delivery_id}, status=status.HTTP_202_ACCEPTED)


