"""The model profiles API: which model servers agents call, and a test call to one.

Reads are for anyone with a role; writes for governance admins. Secrets are never accepted.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import profile_options, services
from agents.api_fields import TimeoutField
from agents.backends import registered_names
from agents.model_calls import model_profile_test as services_model_profile_test
from agents.models import ModelProfile
from core.api_fields import StrictSerializer, UniqueListField
from core.api_views import PaginatedList
from core.permissions import IsGovernanceAdmin, ReadAnyRoleWriteGovernanceAdmin


class ModelProfileOutputSerializer(serializers.ModelSerializer):
    """How a model is reached. There is no key field: only the name of the variable that holds it."""

    class Meta:
        model = ModelProfile
        ref_name = "ModelProfile"
        fields = [
            "name", "backend", "base_url", "model", "api_key_env", "connect_timeout", "read_timeout", "max_retries",
            "fallbacks", "max_tokens", "temperature", "extra_body",
        ]

    extra_body = serializers.DictField(help_text="Added to each request's body.")


class BackendChoiceField(serializers.ChoiceField):
    """One of the backends registered when the serializer is made (built-in, settings, entry points)."""

    def __init__(self, **kwargs):
        names = registered_names()
        kwargs.setdefault("error_messages", {"invalid_choice": (
            f'"{{input}}" is not a registered model backend: one of {", ".join(names)} (a deployment registers '
            "others by name, in WARRANT_MODEL_BACKENDS or as warrant.backends entry points; a dotted path is "
            "never taken).")})
        super().__init__(choices=names, **kwargs)


_SECRET_HINT = "Secrets are never stored or accepted: set api_key_env to the name of the environment variable."


class _ModelProfileFields(StrictSerializer):
    """A profile's writable fields. There is no key field: a body with one is refused."""

    hints = {"api_key": _SECRET_HINT, "key": _SECRET_HINT, "secret": _SECRET_HINT}

    backend = BackendChoiceField(help_text=(
        "The name of a registered backend: scripted, openai, anthropic, or one the deployment registers "
        "(WARRANT_MODEL_BACKENDS, warrant.backends entry points). Never a dotted path: an unregistered name is "
        "refused (400, listing the registered ones) and nothing is imported."))
    base_url = serializers.RegexField(services.HTTP_URL_PATTERN, max_length=200, allow_blank=True, required=False,
                                      help_text="http(s) URL of the model server; empty for none.")
    model = serializers.CharField(max_length=128)
    api_key_env = serializers.CharField(
        max_length=128, allow_blank=True, required=False, validators=[services.KeyEnvNameValidator()],
        help_text="Name of the environment variable holding the key (e.g. OPENAI_API_KEY), never the key: one the "
                  "deployment allows (WARRANT_SECRET_ENV_ALLOWED), never one of the platform's own (DJANGO_…, "
                  "DATABASE…, WARRANT_…, HOME, AWS_…).",
    )
    connect_timeout = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
    read_timeout = TimeoutField(required=False, help_text="Seconds, more than 0 and at most 600.")
    max_retries = serializers.IntegerField(min_value=0, max_value=10, required=False)
    fallbacks = UniqueListField(
        child=serializers.SlugField(max_length=64), max_length=10, required=False,
        help_text="Ordered names of existing profiles to try next; no self reference, no cycles.",
    )
    max_tokens = serializers.IntegerField(
        min_value=1, max_value=profile_options.MAX_TOKENS_LIMIT, allow_null=True, required=False,
        help_text=f"The longest reply one call may get, in tokens, sent as max_tokens; null for "
                  f"{profile_options.DEFAULT_MAX_TOKENS}. Not the run's token budget (the agent's max_tokens).")
    temperature = serializers.FloatField(
        min_value=0, max_value=profile_options.TEMPERATURE_LIMIT, allow_null=True, required=False,
        help_text="Sent as temperature: 0 to 2 (the anthropic backend: 0 to 1); null to send none.")
    extra_body = serializers.DictField(
        required=False, validators=[profile_options.extra_body_validator],
        help_text=f"A JSON object merged into each request's body, for what a server takes beyond the common "
                  f"fields (top_k, seed, response_format, vLLM's repetition_penalty ...): at most "
                  f"{profile_options.EXTRA_BODY_MAX_BYTES} bytes, {profile_options.EXTRA_BODY_MAX_KEYS} keys and "
                  f"{profile_options.EXTRA_BODY_MAX_DEPTH} levels. It may not set "
                  f"{', '.join(sorted(profile_options.RESERVED_KEYS))} (Warrant sets them, or they would give the "
                  "model tools outside the harness), nor hold a secret (api_key, token, authorization ...).")


class ModelProfileListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ModelProfileOutputSerializer
    queryset = ModelProfile.objects.all()

    class InputSerializer(_ModelProfileFields):
        """A new profile: its writable fields plus its name, fixed from then on."""

        name = serializers.SlugField(max_length=64)

        class Meta:
            ref_name = "ModelProfileCreate"

    @extend_schema(
        operation_id="model_profiles_list",
        description="How models are reached. Keys are never stored; api_key_env names the variable.",
        responses=ModelProfileOutputSerializer(many=True),
    )
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="model_profiles_create",
        description="Register a model profile.",
        request=InputSerializer,
        responses={201: ModelProfileOutputSerializer},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        profile = services.model_profile_create(values=serializer.validated_data)
        return Response(self.get_serializer(profile).data, status=status.HTTP_201_CREATED)


class ModelProfileDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = ModelProfileOutputSerializer
    queryset = ModelProfile.objects.all()
    lookup_field = "name"

    class InputSerializer(_ModelProfileFields):
        """Changes to a profile; the name is fixed (fallbacks and agent specs refer to it)."""

        class Meta:
            ref_name = "ModelProfileUpdate"

    @extend_schema(
        operation_id="model_profiles_retrieve",
        description="One model profile.",
        responses=ModelProfileOutputSerializer,
    )
    def get(self, request, name):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        operation_id="model_profiles_partial_update",
        description="Change a model profile; the name is fixed.",
        request=InputSerializer,
        responses=ModelProfileOutputSerializer,
    )
    def patch(self, request, name):
        profile = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        profile = services.model_profile_update(profile=profile, values=serializer.validated_data)
        return Response(self.get_serializer(profile).data)


class ModelProfileTestOutputSerializer(serializers.Serializer):
    """One call to the profile's server, no retries and no fallbacks. Errors never contain a key."""

    profile = serializers.CharField()
    backend = serializers.CharField()
    model = serializers.CharField(help_text="The model that answered (the server's name for it) or the profile's.")
    ok = serializers.BooleanField()
    latency_ms = serializers.IntegerField(allow_null=True)
    reply = serializers.CharField(help_text="The start of the model's answer.")
    error = serializers.CharField(help_text="Why the call failed; empty when it did not.")
    breaker = serializers.ChoiceField(choices=["closed", "open", "half_open"], help_text="The breaker after the test.")


class ModelProfileTestApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ModelProfileTestOutputSerializer
    queryset = ModelProfile.objects.all()
    lookup_field = "name"

    @extend_schema(
        operation_id="model_profiles_test",
        description="Test a profile: one call to its server (no retries, no fallbacks, even with its breaker open). "
                    "200 whether or not the server answered; `ok` says which. A success closes the breaker.",
        request=None,
        responses=ModelProfileTestOutputSerializer,
    )
    def post(self, request, name):
        return Response(self.get_serializer(services_model_profile_test(profile=self.get_object())).data)
