"""The eval runs API: run the golden set (of one agent, or all), and read a run with its results."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from core.api_fields import StrictSerializer
from core.api_views import PaginatedList, errors
from evals.models import EvalResult, EvalRun, Purpose
from evals.permissions import CanRunEvals
from evals.runner import run_evals


class FailureSerializer(serializers.Serializer):
    expectation = serializers.CharField()
    expected = serializers.JSONField()
    actual = serializers.JSONField()

    class Meta:
        ref_name = "EvalFailure"


class ResultSerializer(serializers.ModelSerializer):
    case = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True,
                                              help_text="The golden case; null once it is deleted.")
    failures = FailureSerializer(many=True, read_only=True)

    class Meta:
        model = EvalResult
        ref_name = "EvalResult"
        fields = ["case", "agent_slug", "case_name", "case_version", "passed", "status", "output", "expected", "actual", "failures",
                  "sandbox", "trace", "duration_ms"]


class EvalRunSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    started_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    # Not "status": the runs' and approvals' statuses have other values, and one name per value set keeps the schema's enums apart.
    verdict = serializers.ChoiceField(source="status", choices=EvalRun.Status.choices, read_only=True,
                                      help_text="passed when the pass rate reached the threshold; running until it is known.")
    passed_threshold = serializers.SerializerMethodField(help_text="Whether the pass rate reached the threshold.")
    purpose = serializers.ChoiceField(choices=Purpose.choices, read_only=True,
                                      help_text="set: the golden set as in force; gate: a draft's or a skill's gate; "
                                                "lab: the Policy Lab's trial of an unsaved draft.")

    class Meta:
        model = EvalRun
        ref_name = "EvalRun"
        fields = ["id", "agent", "profile", "threshold", "verdict", "passed_threshold", "total", "passed", "pass_rate",
                  "purpose", "subject", "started_by", "created_at", "finished_at"]

    def get_passed_threshold(self, eval_run) -> bool:
        return eval_run.status == EvalRun.Status.PASSED


class EvalRunDetailSerializer(EvalRunSerializer):
    results = ResultSerializer(many=True, read_only=True)
    report = serializers.JSONField(read_only=True, allow_null=True, help_text=(
        "For a gate or a trial: each case before and after the change (see policies/drafts/), which changed and broke."))

    class Meta(EvalRunSerializer.Meta):
        ref_name = "EvalRunDetail"
        fields = [*EvalRunSerializer.Meta.fields, "report", "results"]


class EvalRunInputSerializer(StrictSerializer):
    agent = serializers.CharField(required=False, max_length=64, help_text="An agent's slug; none: every agent's cases.")
    threshold = serializers.FloatField(required=False, default=1.0, min_value=0.0, max_value=1.0,
                                       help_text="The share of cases that must pass, 0 to 1 (default 1.0: all).")
    profile = serializers.CharField(required=False, max_length=64, default="",
                                    help_text="A model profile to run every case on; none: each agent's own.")

    class Meta:
        ref_name = "EvalRunInput"


class EvalRunListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [CanRunEvals]
    serializer_class = EvalRunSerializer
    queryset = EvalRun.objects.select_related("agent", "started_by")

    @extend_schema(operation_id="eval_runs_list", summary="List eval runs", responses=EvalRunSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(
        operation_id="eval_runs_create", summary="Run the golden set",
        description="Runs the enabled golden cases (of `agent`, or every agent's) through the harness in isolation: "
                    "side effects are answered by a sandbox and nothing is written to the runs tables. Answers "
                    "when every case has run; `verdict` is `passed` when the pass rate reached the threshold.",
        request=EvalRunInputSerializer, responses={201: EvalRunDetailSerializer, **errors(400, 403)},
    )
    def post(self, request):
        serializer = EvalRunInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        eval_run = run_evals(agent_slug=values.get("agent"), threshold=values["threshold"], profile=values["profile"],
                             user=request.user)
        return Response(EvalRunDetailSerializer(_with_results(eval_run.id)).data, status=status.HTTP_201_CREATED)


def _with_results(run_id):
    return EvalRun.objects.select_related("agent", "started_by").prefetch_related("results").get(id=run_id)


class EvalRunDetailApi(GenericAPIView):
    permission_classes = [CanRunEvals]
    serializer_class = EvalRunDetailSerializer
    queryset = EvalRun.objects.select_related("agent", "started_by").prefetch_related("results")
    lookup_url_kwarg = "run_id"

    @extend_schema(operation_id="eval_runs_retrieve", summary="Read an eval run and its results",
                   responses={200: EvalRunDetailSerializer, **errors(403, 404)})
    def get(self, request, run_id):
        return Response(EvalRunDetailSerializer(self.get_object()).data)
