"""The roles API: roles are Django groups; the rules for creating and deleting one are in
governance.roles.
"""

from django.contrib.auth.models import Group
from django.db.models import Count
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.permissions import ReadAnyRoleWriteGovernanceAdmin
from governance import roles

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
        name = serializers.RegexField(roles.ROLE_NAME_PATTERN, max_length=150,
                                       error_messages={"invalid": roles.ROLE_NAME_RULE})

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
        roles.role_create(name=name)
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
        roles.role_delete(role=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
