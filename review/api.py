"""GET dashboard/summary/: the dashboard's figures for a period, for a BI tool (review.figures)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from core.api_views import errors
from review.figures import DEFAULT_DAYS, MAX_DAYS, OUTCOMES, DECISIONS, PeriodError, dashboard_figures, period_from
from review.views import may_see_dashboard
from runs import outcome_refusals

PARAMETERS = ("created_after", "created_before")


class SeesDashboard(BasePermission):
    message = "only compliance, governance admins and superusers see the dashboard"

    def has_permission(self, request, view) -> bool:
        return may_see_dashboard(request.user)


def _counts(name: str, keys: list[str]) -> type[serializers.Serializer]:
    return type(name, (serializers.Serializer,), {key: serializers.IntegerField(min_value=0) for key in keys})


OutcomeCountsSerializer = _counts("OutcomeCountsSerializer", OUTCOMES)
DecisionCountsSerializer = _counts("DecisionCountsSerializer", DECISIONS)
# "from" is a keyword: the fields are given as a mapping.
PeriodSerializer = type("PeriodSerializer", (serializers.Serializer,), {
    "from": serializers.DateField(help_text="The first day (UTC), included."),
    "to": serializers.DateField(help_text="The last day (UTC), included."),
    "days": serializers.IntegerField(min_value=1, max_value=MAX_DAYS),
})


class RunsDaySerializer(serializers.Serializer):
    date = serializers.DateField()
    total = serializers.IntegerField(min_value=0)
    by_outcome = OutcomeCountsSerializer(help_text="Runs asked for that day, by their status now.")
    tainted = serializers.IntegerField(min_value=0)
    blocked = serializers.IntegerField(min_value=0)


RefusedKindsSerializer = type("RefusedKindsSerializer", (serializers.Serializer,), {
    kind: serializers.IntegerField(min_value=0) for kind in outcome_refusals.KINDS})


class RefusedRunsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0, help_text="Runs refused an action: a denial, an expiry, a call "
                                                            "refused when it was to run, a tool cap, a budget refused.")
    by_kind = RefusedKindsSerializer(help_text="Runs refused at least one action of each kind.")


class RunsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0, help_text="Runs asked for in the period.")
    by_outcome = OutcomeCountsSerializer(help_text="By status now (a run still parked counts as awaiting_approval).")
    tainted = serializers.IntegerField(min_value=0)
    blocked = serializers.IntegerField(min_value=0)
    refused = RefusedRunsSerializer()
    by_day = RunsDaySerializer(many=True, help_text="Every day of the period, days without runs too.")


class TimingSerializer(serializers.Serializer):
    decided = serializers.IntegerField(min_value=0)
    median_seconds = serializers.FloatField(allow_null=True, help_text="null when none was decided.")
    p90_seconds = serializers.FloatField(allow_null=True, help_text="90th percentile, interpolated between ranks "
                                                                    "(as PostgreSQL's percentile_cont).")


class TimeToDecisionSerializer(serializers.Serializer):
    all = TimingSerializer(help_text="Approved and denied requests together.")
    approved = TimingSerializer()
    denied = TimingSerializer()


class ApprovalsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0, help_text="Approval requests raised in the period.")
    by_decision = DecisionCountsSerializer(help_text="By status now.")
    time_to_decision = TimeToDecisionSerializer(help_text="From the request to its decision by a person.")


class RefusedSerializer(serializers.Serializer):
    tool = serializers.CharField()
    code = serializers.CharField(help_text="The gate's reason, e.g. not_permitted, denied.")
    count = serializers.IntegerField(min_value=0)
    runs = serializers.IntegerField(min_value=0)


class RefusedActionsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0, help_text="Tool calls the gate refused (tool_refused events).")
    by_tool = RefusedSerializer(many=True)


class FallbackSerializer(serializers.Serializer):
    requested = serializers.CharField(help_text="The profile the run's agent version names.")
    answered = serializers.CharField(help_text="The profile that answered instead.")
    calls = serializers.IntegerField(min_value=0)
    runs = serializers.IntegerField(min_value=0)


class FallbacksSerializer(serializers.Serializer):
    runs = serializers.IntegerField(min_value=0, help_text="Runs with at least one call answered by another profile.")
    calls = serializers.IntegerField(min_value=0)
    by_profile = FallbackSerializer(many=True)


class _Usage(serializers.Serializer):
    runs = serializers.IntegerField(min_value=0)
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    total_tokens = serializers.IntegerField(min_value=0)


class AgentUsageSerializer(_Usage):
    agent = serializers.CharField(help_text="The agent's slug.")


class RoleUsageSerializer(_Usage):
    role = serializers.CharField(help_text="A role the caller held when the run began, or '(no role)'.")


class TokensSerializer(serializers.Serializer):
    by_agent = AgentUsageSerializer(many=True)
    by_role = RoleUsageSerializer(many=True, help_text="A caller in two roles counts in both.")


class PolicyFiredSerializer(serializers.Serializer):
    policy_id = serializers.IntegerField(allow_null=True)
    policy = serializers.CharField()
    fired = serializers.IntegerField(min_value=0)
    effects = serializers.DictField(child=serializers.IntegerField(min_value=0),
                                    help_text="By effect: blocked, playbook added, guidance shown, output formatted, "
                                              "approval requested.")


ReviewStatesSerializer = _counts("ReviewStatesSerializer", ["unassigned", "assigned", "signed_off", "finding_open",
                                                            "resolved"])


class ReviewCoverageSerializer(serializers.Serializer):
    available = serializers.BooleanField(help_text="false when no run was sampled in the period and no finding is open.")
    detail = serializers.CharField()
    sampled = serializers.IntegerField(min_value=0, help_text="Runs sampled for review in the period.")
    reviewed = serializers.IntegerField(min_value=0, help_text="Of those, signed off or with a finding.")
    coverage = serializers.FloatField(allow_null=True, help_text="reviewed / sampled; null when none was sampled.")
    by_state = ReviewStatesSerializer()
    open_findings = serializers.IntegerField(min_value=0, help_text="Reviews with an open finding now, of any period.")


class DashboardSummarySerializer(serializers.Serializer):
    period = PeriodSerializer()
    runs = RunsSerializer()
    approvals = ApprovalsSerializer()
    refused_actions = RefusedActionsSerializer()
    model_fallbacks = FallbacksSerializer()
    tokens = TokensSerializer()
    policies_fired = PolicyFiredSerializer(many=True, help_text="The ten that fired most.")
    review_coverage = ReviewCoverageSerializer()


def _bounds(query) -> dict:
    problems = {name: ["Not a parameter of this operation."] for name in query if name not in PARAMETERS}
    bounds = {}
    for name in PARAMETERS:
        values = query.getlist(name)
        if len(values) > 1:
            problems[name] = ["Give this parameter once."]
        elif values and values[0] == "":
            problems[name] = ["An empty value filters nothing; leave the parameter out instead."]
        elif values:
            bounds[name] = values[0]
    if problems:
        raise ValidationError(problems)
    return bounds


class DashboardSummaryApi(GenericAPIView):
    permission_classes = [SeesDashboard]
    serializer_class = DashboardSummarySerializer
    pagination_class = None
    filter_backends = []

    @extend_schema(
        operation_id="dashboard_summary",
        description="The workbench dashboard's figures for a period of whole UTC days: runs by outcome per day, "
                    "tainted and blocked runs, approval requests by decision and their time to decision, tool calls "
                    "refused, model fallbacks, tokens by agent and by role, the policies that fired most. Each "
                    "counts what happened in the period by its own time (runs and approval requests created, trace "
                    f"events written). Without parameters: the last {DEFAULT_DAYS} days, today included. For "
                    "compliance, governance admins and superusers.",
        parameters=[
            OpenApiParameter("created_after", {"type": "string", "format": "date"},
                             description="The first day, included (YYYY-MM-DD). Default: "
                                         f"{DEFAULT_DAYS} days before created_before."),
            OpenApiParameter("created_before", {"type": "string", "format": "date"},
                             description="The day after the last, excluded (YYYY-MM-DD), as the other filters take "
                                         f"it. Default: tomorrow. At most {MAX_DAYS} days in all."),
        ],
        responses={200: DashboardSummarySerializer, **errors(400, 401, 403)},
    )
    def get(self, request):
        bounds = _bounds(request.query_params)
        try:
            period = period_from(bounds.get("created_after"), bounds.get("created_before"),
                                 first_name="created_after", last_name="created_before", last_excluded=True)
        except PeriodError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(dashboard_figures(period))
