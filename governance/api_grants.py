"""The tool grants API: which roles may use which tools."""

import django_filters
from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from agents.models import Tool
from core.api_errors import Conflict
from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.permissions import ReadAnyRoleWriteGovernanceAdmin
from governance import services
from governance.models import ToolGrant



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
