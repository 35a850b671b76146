"""Service accounts over the API: list, make, read, disable and enable them (governance admins
only, reads too: who the platform's headless identities are and what they may do is theirs to
know). What the workbench's Service accounts page and `manage.py service_account` do, through the
same services; none of it gives the account a password or a token (triggers.guards).
"""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_fields import StrictSerializer
from core.api_views import errors
from core.permissions import IsGovernanceAdmin
from triggers import services
from triggers.models import ServiceAccount


class ServiceAccountSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    active = serializers.BooleanField(source="user.is_active", read_only=True,
                                      help_text="False once disabled: its triggers' fires are refused.")
    roles = serializers.SerializerMethodField(help_text="Its roles: their grants decide what its runs may use.")
    triggers = serializers.SerializerMethodField(help_text="The triggers that run as it.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    disabled_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = ServiceAccount
        ref_name = "ServiceAccount"
        fields = ["username", "description", "active", "roles", "triggers", "created_by", "created_at",
                  "disabled_by", "disabled_at"]

    def get_roles(self, account) -> list[str]:
        return sorted(group.name for group in account.user.groups.all())

    def get_triggers(self, account) -> list[str]:
        return sorted(trigger.name for trigger in account.triggers.all())


class ServiceAccountInputSerializer(StrictSerializer):
    username = serializers.SlugField(max_length=150)
    roles = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list,
                                  max_length=50)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

    class Meta:
        ref_name = "ServiceAccountInput"


def _accounts():
    return (ServiceAccount.objects.select_related("user", "created_by", "disabled_by")
            .prefetch_related("user__groups", "triggers").order_by(f"user__{get_user_model().USERNAME_FIELD}"))


def _answer(account: ServiceAccount, code=status.HTTP_200_OK) -> Response:
    return Response(ServiceAccountSerializer(_accounts().get(pk=account.pk)).data, status=code)


@extend_schema_view(get=extend_schema(operation_id="service_accounts_list", summary="List service accounts"))
class ServiceAccountListCreateApi(ListAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ServiceAccountSerializer

    def get_queryset(self):
        return _accounts()

    @extend_schema(operation_id="service_accounts_create", summary="Make a service account",
                   description="A user nobody signs in as (unusable password, not staff), in the roles given.",
                   request=ServiceAccountInputSerializer,
                   responses={201: ServiceAccountSerializer, **errors(400, 403, 409)})
    def post(self, request):
        serializer = ServiceAccountInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account = services.service_account_create(by=request.user, **serializer.validated_data)
        return _answer(account, status.HTTP_201_CREATED)


class ServiceAccountDetailApi(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ServiceAccountSerializer

    @extend_schema(operation_id="service_accounts_retrieve", summary="Read a service account",
                   responses={200: ServiceAccountSerializer, **errors(403, 404)})
    def get(self, request, username):
        return _answer(services.service_account_by_name(username))


class _SetActive(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = ServiceAccountSerializer
    active = True

    def post(self, request, username):
        account = services.service_account_by_name(username)
        return _answer(services.service_account_set_active(account, active=self.active, by=request.user))


class ServiceAccountDisableApi(_SetActive):
    active = False

    @extend_schema(operation_id="service_accounts_disable", summary="Disable a service account", request=None,
                   description="Its user becomes inactive: its triggers' fires are refused (recorded), nothing "
                               "authenticates as it. Its runs already going on are not stopped.",
                   responses={200: ServiceAccountSerializer, **errors(403, 404)})
    def post(self, request, username):
        return super().post(request, username)


class ServiceAccountEnableApi(_SetActive):
    @extend_schema(operation_id="service_accounts_enable", summary="Enable a disabled service account again",
                   request=None, responses={200: ServiceAccountSerializer, **errors(403, 404)})
    def post(self, request, username):
        return super().post(request, username)
