"""The skills API: list, import, read, replace and retire SKILL.md skills. Thin views over skills.services.

A skill is written only as its SKILL.md text (`source`): name, description, tags, allowed tools,
body and version all come from it, so none of them is writable on its own.
"""

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.api_errors import Conflict
from core.permissions import ReadAnyRoleWriteGovernanceAdmin
from skills.models import Skill
from skills.parser import SkillFormatError, parse_skill_md
from skills.gate import describe
from skills.services import EMERGENCY_ASKED, skill_import_report

# Fields a skill has that only its SKILL.md text may change (or that nothing may change).
DERIVED = frozenset({
    "id", "name", "description", "tags", "allowed_tools", "body", "version", "sha256", "history",
    "updated_by", "created_at", "updated_at", "inputs", "outputs", "side_effects", "author", "approved_by",
    "approved_at", "emergency_reason", "emergency_request",
})


# Wrapped in allOf so drf-spectacular keeps the enum inline: runs and approvals also have a
# `status` (other choices), and a shared generated name would collide (a schema warning).
@extend_schema_field({"allOf": [{"type": "string", "enum": Skill.Status.values}],
                      "description": "`draft` -> `approved` (by a governance admin who is not the author) -> "
                                     "`active` (the only status runs use) -> `retired`."})
class SkillStatusField(serializers.ChoiceField):
    """A skill's status: draft, approved, active or retired."""

    def __init__(self, **kwargs):
        super().__init__(choices=Skill.Status.choices, **kwargs)


def _parsed(source: str):
    """The parsed SKILL.md, or a 400 on `source` carrying the parser's own message."""
    try:
        return parse_skill_md(source)
    except SkillFormatError as exc:
        raise serializers.ValidationError({"source": [str(exc)]}) from None


def _import(*, source: str, status_: str | None, user, emergency_reason: str = "",
            confirm_emergency: bool = False) -> tuple[Skill, str]:
    try:
        return skill_import_report(text=source, user=user, status=status_, emergency_reason=emergency_reason,
                                   confirm_emergency=confirm_emergency)
    except SkillFormatError as exc:
        raise serializers.ValidationError({"source": [str(exc)]}) from None


class EmergencyRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(source="emergency_request_reason")
    requested_by = serializers.CharField(source="emergency_requested_by.username", allow_null=True)
    requested_at = serializers.DateTimeField(source="emergency_requested_at")
    change = serializers.SerializerMethodField(
        help_text="`activate`, or `take_out_of_force`: the active version retired, made a draft, or given new text.")
    to = serializers.SerializerMethodField(help_text="The status the confirmed change leaves the skill in.")
    new_sha256 = serializers.SerializerMethodField(
        help_text="For new text that takes the active version out of force: that text's sha256; the confirmer "
                  "sends the same text.")

    def get_change(self, skill: Skill) -> str:
        return describe(skill.emergency_request_action)["change"]

    def get_to(self, skill: Skill) -> str:
        return describe(skill.emergency_request_action)["to"]

    def get_new_sha256(self, skill: Skill) -> str | None:
        return describe(skill.emergency_request_action)["new_sha256"]

    class Meta:
        ref_name = "SkillEmergencyRequest"


class SkillOutputSerializer(serializers.ModelSerializer):
    status = SkillStatusField(read_only=True)
    tags = serializers.ListField(child=serializers.CharField())
    allowed_tools = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Skill
        ref_name = "Skill"
        fields = ["name", "description", "version", "status", "tags", "allowed_tools", "inputs", "outputs",
                  "side_effects", "sha256", "updated_at"]


class SkillDetailOutputSerializer(SkillOutputSerializer):
    updated_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    author = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)
    approved_by = serializers.SlugRelatedField(read_only=True, slug_field="username", allow_null=True)

    emergency_request = serializers.SerializerMethodField(
        help_text="An emergency activation or removal one governance admin asked for, waiting for a second to "
                  "confirm (confirm_emergency); null when none is asked for this text.")

    class Meta(SkillOutputSerializer.Meta):
        ref_name = "SkillDetail"
        fields = SkillOutputSerializer.Meta.fields + ["body", "source", "updated_by", "author", "approved_by",
                                                      "approved_at", "created_at", "emergency_reason",
                                                      "emergency_request"]

    @extend_schema_field(EmergencyRequestSerializer(allow_null=True))
    def get_emergency_request(self, skill: Skill) -> dict | None:
        if skill.emergency_requested_at is None or skill.emergency_request_sha256 != skill.sha256:
            return None
        return EmergencyRequestSerializer(skill).data


class SkillFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Skill.Status.choices)
    tag = django_filters.CharFilter(method="filter_tag", label="Skills carrying this tag (case-insensitive).")

    class Meta:
        model = Skill
        fields = ["status", "tag"]

    def filter_tag(self, queryset, name, value):
        # JSON containment is not portable to SQLite, and the skill library is small: match in Python.
        wanted = value.casefold()
        ids = [pk for pk, tags in queryset.values_list("pk", "tags") if any(str(t).casefold() == wanted for t in tags)]
        return queryset.filter(pk__in=ids)


@extend_schema_view(get=extend_schema(operation_id="skills_list", summary="List skills"))
class SkillListCreateApi(ListAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = SkillOutputSerializer
    filterset_class = SkillFilter
    queryset = Skill.objects.all()

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        read_only_names = DERIVED
        source = serializers.CharField(trim_whitespace=False, help_text="The SKILL.md text.")
        status = SkillStatusField(required=False)

        class Meta:
            ref_name = "SkillCreateInput"

    @extend_schema(
        operation_id="skills_create", summary="Import a skill from its SKILL.md text",
        request=InputSerializer, responses={201: SkillDetailOutputSerializer, **errors(400, 403, 409)},
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        name = _parsed(data["source"]).name
        if Skill.objects.filter(name=name).exists():
            raise Conflict(f"a skill named {name!r} already exists; PATCH skills/{name}/ to change it",
                           details={"name": name})
        skill, _ = _import(source=data["source"], status_=data.get("status"), user=request.user)
        return Response(SkillDetailOutputSerializer(skill).data, status=status.HTTP_201_CREATED)


class SkillDetailApi(GenericAPIView):
    permission_classes = [ReadAnyRoleWriteGovernanceAdmin]
    serializer_class = SkillDetailOutputSerializer
    queryset = Skill.objects.select_related("updated_by", "author", "approved_by", "emergency_requested_by")
    lookup_field = lookup_url_kwarg = "name"

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        read_only_names = DERIVED
        source = serializers.CharField(trim_whitespace=False, required=False,
                                       help_text="The new SKILL.md text; its name must be the skill's.")
        status = SkillStatusField(required=False)
        emergency_reason = serializers.CharField(
            required=False, allow_blank=True, max_length=2000,
            help_text="When the golden sets fail with the change (an activation, or taking the active version "
                      "out of force): ask for it in an emergency for this stated reason (202; nothing changes in "
                      "force until another governance admin confirms it).")
        confirm_emergency = serializers.BooleanField(
            required=False, default=False,
            help_text="With the same change: confirm the emergency activation or removal another governance admin "
                      "asked for on this text; refused (403 second_admin_required) to the one who asked and to "
                      "the author.")

        class Meta:
            ref_name = "SkillUpdateInput"

        def validate(self, attrs):
            if attrs.get("emergency_reason", "").strip() and attrs.get("confirm_emergency"):
                raise serializers.ValidationError({"confirm_emergency": [
                    "one governance admin asks (emergency_reason) and another confirms: not both at once"]})
            return attrs

    @extend_schema(operation_id="skills_retrieve", summary="Read a skill", responses={200: SkillDetailOutputSerializer, **errors(403, 404)})
    def get(self, request, name):
        return Response(SkillDetailOutputSerializer(self.get_object()).data)

    @extend_schema(
        operation_id="skills_partial_update", summary="Replace a skill's SKILL.md and/or change its status",
        description="Activating a skill (status `active`) passes the gate first: every agent's golden set with the "
                    "skill active. A failing set answers 409 `gate_failed` with the report (each case before and "
                    "after) and the skill stays as it was. The emergency path takes two governance admins: "
                    "`emergency_reason` asks for it (202, the skill shows the pending `emergency_request`; 409 "
                    "`emergency_pending` if it was asked already); `confirm_emergency` by another governance admin "
                    "activates it whatever the gate says (403 `second_admin_required` to the one who asked and to "
                    "the text's author, 409 `no_emergency_request` when none was asked for this text, 409 "
                    "`request_expired` after WARRANT_SECOND_ADMIN_WINDOW_HOURS); the version names both and runs "
                    "that use it carry the mark in their receipts. Taking the active version out of force (status "
                    "`retired` or `draft`, or new `source`, which is a draft) lifts its contract, so it passes the "
                    "gate too: every agent's golden set without the skill; a failing set answers 409 `gate_failed` "
                    "(details `removal`: true) and the skill stays active, and the emergency path is the same, the "
                    "confirmer sending the same change (status, and source if any); the history row names both.",
        request=InputSerializer,
        responses={200: SkillDetailOutputSerializer, 202: SkillDetailOutputSerializer, **errors(400, 403, 404, 409)},
    )
    def patch(self, request, name):
        skill = self.get_object()
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        source = data.get("source", skill.source)
        if "source" in data and _parsed(source).name != skill.name:
            raise serializers.ValidationError(
                {"source": [f"the SKILL.md names {_parsed(source).name!r}, not {skill.name!r}; a skill cannot be renamed"]}
            )
        skill, outcome = _import(source=source, status_=data.get("status"), user=request.user,
                                 emergency_reason=data.get("emergency_reason", ""),
                                 confirm_emergency=data.get("confirm_emergency", False))
        return Response(SkillDetailOutputSerializer(self.get_object()).data,
                        status=status.HTTP_202_ACCEPTED if outcome == EMERGENCY_ASKED else status.HTTP_200_OK)

    @extend_schema(operation_id="skills_retire", summary="Retire a skill",
                   responses={204: None, **errors(403, 404, 409)})
    def delete(self, request, name):
        """Retires the skill rather than deleting it: status becomes "retired", so runs stop using it
        while the row (and the versions receipts name) stays readable. PATCH the status to bring it back.
        An active skill is retired only when every agent's golden set passes without it (409 `gate_failed`
        otherwise); past a failing set, PATCH `{"status": "retired", "emergency_reason": ...}` and a second
        governance admin's `confirm_emergency`."""
        skill = self.get_object()
        _import(source=skill.source, status_=Skill.Status.RETIRED, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
