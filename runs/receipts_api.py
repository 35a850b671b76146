"""Receipts over the API: read, verify, export. Read-only by construction: no write verbs exist."""

import csv
import io
import json

import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import renderers, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from runs import selectors
from runs.models import Receipt, Run
from runs.receipts import receipt_verify

EXPORT_LIMIT = 10_000
EXPORT_FORMATS = ("jsonl", "csv")
CSV_COLUMNS = ["seq", "id", "run_id", "created_at", "status", "agent", "caller", "hash", "prev_hash"]


class ReceiptOutputSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.id")
    body = serializers.SerializerMethodField()

    class Meta:
        model = Receipt
        fields = ["id", "run_id", "seq", "prev_hash", "hash", "created_at", "body"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_body(self, receipt: Receipt) -> dict:
        return json.loads(receipt.body)


class ReceiptFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(field_name="run__status", choices=Run._meta.get_field("status").choices)
    agent = django_filters.CharFilter(field_name="run__agent__slug")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Receipt
        fields = ["status", "agent", "created_after", "created_before"]


class _Receipts:
    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Receipt.objects.none()
        return selectors.receipts_visible_to(self.request.user).select_related("run", "run__agent").order_by("seq")


class ReceiptListApi(_Receipts, ListAPIView):
    serializer_class = ReceiptOutputSerializer
    filterset_class = ReceiptFilter


class ReceiptDetailApi(_Receipts, GenericAPIView):
    serializer_class = ReceiptOutputSerializer

    @extend_schema(operation_id="receipts_retrieve")
    def get(self, request, receipt_id):
        return Response(ReceiptOutputSerializer(get_object_or_404(self.get_queryset(), id=receipt_id)).data)


class VerificationSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    receipt = serializers.UUIDField(allow_null=True)
    seq = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class ReceiptVerifyApi(_Receipts, GenericAPIView):
    serializer_class = VerificationSerializer

    @extend_schema(operation_id="receipts_verify")
    def get(self, request, receipt_id):
        receipt = get_object_or_404(self.get_queryset(), id=receipt_id)
        result = receipt_verify(receipt=receipt)
        named, seq = result.receipt, result.seq
        if not result.valid and not self.get_queryset().filter(id=named).exists():
            # The broken receipt belongs to someone else: say the chain is broken, not whose it is.
            named, seq = None, None
        return Response({"valid": result.valid, "receipt": named, "seq": seq, "reason": result.reason})


class JSONLinesRenderer(renderers.BaseRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):  # an error body
            return json.dumps(data).encode()
        return "".join(f"{line}\n" for line in data).encode()


def neutralise(value) -> str:
    """A cell a spreadsheet would run as a formula is prefixed with a quote."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class CSVRenderer(renderers.BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):
            return json.dumps(data).encode()
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for line in data:
            body = json.loads(line["body"])
            row = {**line, "status": body["status"], "agent": body["agent"]["slug"], "caller": body["caller"]["username"]}
            writer.writerow([neutralise(row[c]) for c in CSV_COLUMNS])
        return out.getvalue().encode()


class ExportResponse(Response):
    """An export keeps its Content-Type when it is empty (DRF drops it from an empty body)."""

    @property
    def rendered_content(self):
        content = super().rendered_content
        if not content:
            self["Content-Type"] = self.accepted_renderer.media_type
        return content


class ExportNegotiation(DefaultContentNegotiation):
    """`format` picks the renderer and is required: a missing or unknown one is a 400, not a 404."""

    def select_renderer(self, request, renderers, format_suffix=None):
        values = request.query_params.getlist("format")
        if len(values) != 1 or values[0] not in EXPORT_FORMATS:
            raise ValidationError({"format": [f"Give format once: {' or '.join(EXPORT_FORMATS)}."]})
        return super().select_renderer(request, renderers, format_suffix)


class ReceiptExportApi(_Receipts, GenericAPIView):
    """Export receipts as JSON lines (each line the canonical body with its chain fields) or CSV."""

    serializer_class = ReceiptOutputSerializer
    filterset_class = ReceiptFilter
    renderer_classes = [renderers.JSONRenderer, JSONLinesRenderer, CSVRenderer]  # JSON first: errors render as JSON
    content_negotiation_class = ExportNegotiation

    @extend_schema(operation_id="receipts_export", responses={(200, "application/x-ndjson"): OpenApiTypes.STR,
                                                              (200, "text/csv"): OpenApiTypes.STR},
                   parameters=[OpenApiParameter("format", str, enum=list(EXPORT_FORMATS), required=True)])
    def get(self, request):
        receipts = self.filter_queryset(self.get_queryset())[:EXPORT_LIMIT]
        if request.accepted_renderer.format == "csv":
            data = [{"seq": r.seq, "id": r.id, "run_id": r.run_id, "created_at": r.created_at.isoformat(),
                     "hash": r.hash, "prev_hash": r.prev_hash, "body": r.body} for r in receipts]
        else:
            data = [json.dumps({"id": str(r.id), "seq": r.seq, "prev_hash": r.prev_hash, "hash": r.hash,
                                "body": json.loads(r.body)}, sort_keys=True, ensure_ascii=False) for r in receipts]
        filename = f"warrant-receipts.{request.accepted_renderer.format}"
        return ExportResponse(data, headers={"Content-Disposition": f'attachment; filename="{filename}"'})
