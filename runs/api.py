"""The run API: start, read, trace, cancel; approvals; receipts. Thin views over services."""

import json

from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.permissions import CanStartRuns
from runs import selectors, services
from runs.models import ApprovalRequest, Receipt, Run, RunEvent
from runs.receipts import receipt_verify


class PendingApprovalSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tool = serializers.CharField()
    arguments = serializers.JSONField()
    approver_role = serializers.CharField(source="approver_role.name")
    expires_at = serializers.DateTimeField()


class RunOutputSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.slug")
    agent_version = serializers.IntegerField(source="agent_version.version")
    caller = serializers.CharField(source="caller.username")
    usage = serializers.SerializerMethodField()
    pending_approval = serializers.SerializerMethodField()
    receipt_id = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id", "agent", "agent_version", "caller", "status", "stop_reason", "error", "error_message", "tainted",
            "input", "output", "created_at", "started_at", "finished_at", "usage", "pending_approval", "receipt_id",
        ]

    def to_representation(self, run: Run) -> dict:
        data = super().to_representation(run)
        for name in ("stop_reason", "error", "error_message"):
            data[name] = data[name] or None
        return data

    def get_usage(self, run: Run) -> dict:
        return {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "tokens_estimated": True,
                "llm_calls": run.llm_calls, "tool_calls": run.tool_calls}

    def get_pending_approval(self, run: Run) -> dict | None:
        approval = selectors.pending_approval(run)
        return PendingApprovalSerializer(approval).data if approval else None

    def get_receipt_id(self, run: Run) -> str | None:
        receipt = getattr(run, "receipt", None) if run.is_terminal else None
        return str(receipt.id) if receipt else None


class RunListCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        agent = serializers.SlugField(max_length=64)
        input = serializers.CharField(max_length=services.MAX_INPUT_CHARS, trim_whitespace=False)
        idempotency_key = serializers.CharField(max_length=128, required=False)

    def get_permissions(self):
        return [CanStartRuns()] if self.request.method == "POST" else [IsAuthenticated()]

    def get(self, request):
        queryset = selectors.runs_visible_to(request.user)
        for name in ("status", "agent__slug"):
            value = request.query_params.get(name.split("__")[0])
            if value:
                queryset = queryset.filter(**{name: value})
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(RunOutputSerializer(page, many=True).data)

    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key = request.headers.get("Idempotency-Key") or data.get("idempotency_key")
        run, created = services.run_start(
            agent_slug=data["agent"], input_text=data["input"], caller=request.user, idempotency_key=key
        )
        run = selectors.runs_visible_to(request.user).get(id=run.id)
        return Response(RunOutputSerializer(run).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RunDetailApi(APIView):
    def get(self, request, run_id):
        run = get_object_or_404(selectors.runs_visible_to(request.user), id=run_id)
        return Response(RunOutputSerializer(run).data)


class RunEventsApi(ListAPIView):
    class OutputSerializer(serializers.ModelSerializer):
        class Meta:
            model = RunEvent
            fields = ["seq", "step", "kind", "data", "created_at"]

    serializer_class = OutputSerializer

    def get_queryset(self):
        run = get_object_or_404(selectors.runs_visible_to(self.request.user), id=self.kwargs["run_id"])
        return RunEvent.objects.filter(run=run).order_by("seq")


class RunCancelApi(APIView):
    def post(self, request, run_id):
        # Only the caller cancels a run; others get 404, as if it did not exist for them.
        run = get_object_or_404(Run.objects.filter(caller=request.user), id=run_id)
        run = services.run_cancel(run=run, user=request.user)
        return Response(RunOutputSerializer(selectors.runs_visible_to(request.user).get(id=run.id)).data)


class ApprovalOutputSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.id")
    agent = serializers.CharField(source="run.agent.slug")
    caller = serializers.CharField(source="run.caller.username")
    approver_role = serializers.CharField(source="approver_role.name")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    run_tainted = serializers.BooleanField(source="run.tainted")

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "run_id", "agent", "caller", "tool", "arguments", "arguments_sha256", "policy_name",
            "policy_version", "approver_role", "reasons", "model_rationale", "run_tainted", "status", "decided_by",
            "decided_at", "reason", "expires_at", "created_at",
        ]


class ApprovalListApi(ListAPIView):
    serializer_class = ApprovalOutputSerializer

    def get_queryset(self):
        # Without a beat process (the embedded default) overdue requests are closed when looked at.
        services.approval_expire_due()
        queryset = selectors.approvals_visible_to(self.request.user).order_by("created_at")
        wanted = self.request.query_params.get("status")
        if wanted:
            queryset = queryset.filter(status=wanted)
        return queryset


class ApprovalDecideApi(APIView):
    approve = True

    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")

    def post(self, request, approval_id):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        approval = get_object_or_404(selectors.approvals_visible_to(request.user), id=approval_id)
        approval = services.approval_decide(
            approval_id=approval.id, user=request.user, approve=self.approve, reason=serializer.validated_data["reason"]
        )
        approval = selectors.approvals_visible_to(request.user).get(id=approval.id)
        return Response(ApprovalOutputSerializer(approval).data)


class ReceiptOutputSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.id")
    body = serializers.SerializerMethodField()

    class Meta:
        model = Receipt
        fields = ["id", "run_id", "seq", "prev_hash", "hash", "created_at", "body"]

    def get_body(self, receipt: Receipt) -> dict:
        return json.loads(receipt.body)


class ReceiptListApi(ListAPIView):
    serializer_class = ReceiptOutputSerializer

    def get_queryset(self):
        return selectors.receipts_visible_to(self.request.user).order_by("seq")


class ReceiptDetailApi(APIView):
    def get(self, request, receipt_id):
        receipt = get_object_or_404(selectors.receipts_visible_to(request.user), id=receipt_id)
        return Response(ReceiptOutputSerializer(receipt).data)


class ReceiptVerifyApi(APIView):
    def get(self, request, receipt_id):
        receipt = get_object_or_404(selectors.receipts_visible_to(request.user), id=receipt_id)
        result = receipt_verify(receipt=receipt)
        named, seq = result.receipt, result.seq
        if not result.valid and not selectors.receipts_visible_to(request.user).filter(id=named).exists():
            # The broken receipt belongs to someone else: say the chain is broken, not whose it is.
            named, seq = None, None
        return Response({"valid": result.valid, "receipt": named, "seq": seq, "reason": result.reason})
