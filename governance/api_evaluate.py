"""The Policy Lab's dry run: what the policies would decide for an input, without a run."""

from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents.models import Agent
from core.api_errors import Unprocessable
from core.api_fields import StrictFieldsMixin
from core.api_views import errors
from core.permissions import IsGovernanceAdmin
from governance import engine
from governance.evaluation import MAX_EVALUATE_INPUT_CHARS, policy_evaluate


class PolicyError(Unprocessable):
    """A stored policy cannot be evaluated: what a run would fail closed on."""

    code = "policy_error"



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
    quorum = serializers.IntegerField(help_text="Approvals needed, each from a different member of the role.")
    escalate_to_role = serializers.CharField(allow_null=True, help_text="Where an undecided request would move.")
    escalate_after_seconds = serializers.IntegerField(allow_null=True, help_text="After how long.")

    class Meta:
        ref_name = "PolicyApprovalDecision"


class RefusalSerializer(serializers.Serializer):
    code = serializers.CharField()
    reason = serializers.CharField()

    class Meta:
        ref_name = "PolicyRefusal"


class EvaluatedToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    side_effect = serializers.BooleanField()
    guides = ContentDecisionSerializer(many=True)
    needs_approval = serializers.BooleanField()
    approval = ApprovalDecisionSerializer(allow_null=True)
    refused = RefusalSerializer(allow_null=True, help_text=(
        "What a run would answer a call of this tool instead of running it (e.g. not_permitted: outside the "
        "skill the input activates); null when the call would be allowed or would wait for approval."))
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
