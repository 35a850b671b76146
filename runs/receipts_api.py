"""Receipts over the API: read, verify, export. Read-only by construction: no write verbs exist."""

import json
from datetime import timezone

import django_filters
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import renderers, serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.filters import IntegerFilter, UtcIsoDateTimeFilter
from runs import selectors, signing
from runs.access_log import receipt_access_record
from runs.evidence import EvidenceAccessDenied, EvidencePeriodError, evidence_bundle_stream, evidence_period_bound
from runs.models import Receipt, Run
from runs.receipts import receipt_verify
from runs.receipts_export import EXPORT_FORMATS, EXPORT_LIMIT, MEDIA_TYPES, export_part, receipts_export



class ReceiptOutputSerializer(serializers.ModelSerializer):
    run_id = serializers.UUIDField(source="run.id")
    body = serializers.SerializerMethodField()

    class Meta:
        model = Receipt
        fields = ["id", "run_id", "seq", "prev_hash", "hash", "created_at", "body"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_body(self, receipt: Receipt) -> dict:
        return json.loads(receipt.body)


MAX_SEQ = 2_147_483_647  # a receipt's seq is a PositiveIntegerField


@extend_schema_field({"type": "integer", "minimum": 0, "maximum": MAX_SEQ})
class SeqFilter(IntegerFilter):
    pass


class ReceiptFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(field_name="run__status", choices=Run._meta.get_field("status").choices)
    agent = django_filters.CharFilter(field_name="run__agent__slug")
    created_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    seq_after = SeqFilter(field_name="seq", lookup_expr="gt", min_value=0, max_value=MAX_SEQ,
                          help_text="Only receipts after this one in the chain (how a large export is read in parts).")

    class Meta:
        model = Receipt
        fields = ["status", "agent", "created_after", "created_before", "seq_after"]


class _Receipts:
    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Receipt.objects.none()
        return selectors.receipts_visible_to(self.request.user).select_related("run", "run__agent").order_by("seq")


class ReceiptListApi(_Receipts, ListAPIView):
    serializer_class = ReceiptOutputSerializer
    filterset_class = ReceiptFilter

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        receipt_access_record(user=self.request.user, action="list", receipts=page if page is not None else queryset,
                              channel="api", query=self.request.META.get("QUERY_STRING", ""))
        return page


class ReceiptDetailApi(_Receipts, GenericAPIView):
    serializer_class = ReceiptOutputSerializer

    @extend_schema(operation_id="receipts_retrieve")
    def get(self, request, receipt_id):
        receipt = get_object_or_404(self.get_queryset(), id=receipt_id)
        receipt_access_record(user=request.user, action="view", receipts=[receipt], channel="api")
        return Response(ReceiptOutputSerializer(receipt).data)


class VerificationFailureSerializer(serializers.Serializer):
    check = serializers.ChoiceField(choices=["chain", "signature", "run", "trace", "approvals", "completeness",
                                             "checkpoints", "witness", "append_only"])
    record = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    seq = serializers.IntegerField(allow_null=True)
    receipt = serializers.UUIDField(allow_null=True)


class AnchorSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="The checkpoint's seq: its signed head is that receipt's hash.")
    where = serializers.ChoiceField(choices=["witness", "database"],
                                    help_text="witness: a line of the witness file; database: the database's copy.")


class VerificationSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    receipt = serializers.UUIDField(allow_null=True)
    seq = serializers.IntegerField(allow_null=True)
    check = serializers.CharField(help_text="The first failed check ('' when valid).")
    reason = serializers.CharField()
    failures = VerificationFailureSerializer(many=True)
    anchor = AnchorSerializer(allow_null=True, help_text="The signed checkpoint the receipt chains to; null: not "
                                                         "yet anchored (no checkpoint at or after it yet).")
    walked = serializers.IntegerField(help_text="Receipts whose links and signatures were checked.")


class ReceiptVerifyApi(_Receipts, GenericAPIView):
    serializer_class = VerificationSerializer

    @extend_schema(operation_id="receipts_verify",
                   description="This receipt in full (hash, canonical body, signature by a known key, its run's "
                               "row, trace and approvals) and its place in the chain: the link to the receipt "
                               "before it, and every link and signature from it to the nearest signed checkpoint at "
                               "or after it (the witness file's first, else the database's), which must match the "
                               "chain. `anchor` names that checkpoint; with none yet the walk goes to the head and "
                               "`anchor` is null (not a failure). The newest checkpoints are held against the "
                               "chain's head (a cut-off tail fails), runs that ended without a receipt and the "
                               "append-only triggers are checked. `manage.py verify_receipts` checks the whole "
                               "chain. Every failure is listed; one about a receipt or run you may not read says "
                               "which check failed, not whose.")
    def get(self, request, receipt_id):
        receipt = get_object_or_404(self.get_queryset(), id=receipt_id)
        result = receipt_verify(receipt=receipt)
        receipt_access_record(user=request.user, action="verify", receipts=[receipt], channel="api")
        visible = set(map(str, self.get_queryset().filter(
            id__in=[p.receipt for p in result.failures if p.receipt]).values_list("id", flat=True)))
        shown_runs = set(map(str, selectors.runs_visible_to(request.user).filter(
            id__in=[p.run for p in result.failures if p.run and not p.receipt]).values_list("id", flat=True)))
        failures = []
        for problem in result.failures:
            if (problem.receipt and problem.receipt not in visible) or (problem.run and not problem.receipt
                                                                         and problem.run not in shown_runs):
                # Someone else's receipt or run: say which check failed, not whose.
                failures.append({"check": problem.check, "record": None, "seq": None, "receipt": None,
                                 "reason": "a record you may not read failed this check"})
            else:
                failures.append({"check": problem.check, "record": problem.record, "seq": problem.seq,
                                 "receipt": problem.receipt, "reason": problem.reason})
        first = failures[0] if failures else {"receipt": str(receipt.id), "seq": receipt.seq, "check": "",
                                              "reason": result.reason}
        anchor = {"seq": result.anchor[0], "where": result.anchor[1]} if result.anchor else None
        return Response({"valid": result.valid, "receipt": first["receipt"], "seq": first["seq"],
                         "check": first["check"], "reason": first["reason"], "failures": failures,
                         "anchor": anchor, "walked": result.checked})


class KeySerializer(serializers.Serializer):
    key_id = serializers.CharField()
    algorithm = serializers.ChoiceField(choices=["Ed25519"])
    public_key = serializers.CharField(help_text="The raw 32-byte Ed25519 public key, base64.")
    status = serializers.ChoiceField(choices=["active", "retired"])


class KeySetSerializer(serializers.Serializer):
    keys = KeySerializer(many=True)


class ReceiptKeysApi(GenericAPIView):
    """The public keys that verify receipts, checkpoints and bundles: the active one and every retired one."""

    serializer_class = KeySetSerializer

    @extend_schema(operation_id="receipts_keys")
    def get(self, request):
        return Response(signing.key_set_document())


class JSONLinesRenderer(renderers.BaseRenderer):
    media_type = MEDIA_TYPES["jsonl"]
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):  # an error body
            return json.dumps(data).encode()
        return receipts_export(data, format="jsonl").encode()


class CSVRenderer(renderers.BaseRenderer):
    media_type = MEDIA_TYPES["csv"]
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):
            return json.dumps(data).encode()
        return receipts_export(data, format="csv").encode()


class ZipRenderer(renderers.BaseRenderer):
    """format=bundle: the view answers the zip itself, streamed; this renders its errors only."""

    media_type = "application/zip"
    format = "bundle"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


API_EXPORT_FORMATS = (*EXPORT_FORMATS, "bundle")
BUNDLE_PARAMETERS = ("created_after", "created_before")


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
        if len(values) != 1 or values[0] not in API_EXPORT_FORMATS:
            raise ValidationError({"format": [f"Give format once: {', '.join(API_EXPORT_FORMATS)}."]})
        return super().select_renderer(request, renderers, format_suffix)


def _bundle_bounds(query) -> dict:
    """created_after and created_before of a bundle, each once and a date; nothing else may narrow it."""
    errors, bounds = {}, {}
    for name in query:
        if name not in ("format", *BUNDLE_PARAMETERS):
            errors[name] = ["A bundle holds every receipt of its period: choose it by created_after and "
                            "created_before only."]
    for name in BUNDLE_PARAMETERS:
        values = query.getlist(name)
        if len(values) > 1:
            errors[name] = ["Give it once."]
        elif values:
            try:
                bounds[name] = evidence_period_bound(text=values[0], name=name)
            except EvidencePeriodError as exc:
                errors[name] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return bounds


def _stamp(value) -> str:
    return value.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ") if value else ""


class ReceiptExportApi(_Receipts, GenericAPIView):
    """Export receipts as JSON lines (each line the canonical body with its chain fields) or CSV, or a
    period's evidence bundle (a zip the offline verifier checks)."""

    serializer_class = ReceiptOutputSerializer
    filterset_class = ReceiptFilter
    renderer_classes = [renderers.JSONRenderer, JSONLinesRenderer, CSVRenderer, ZipRenderer]  # JSON first: errors
    content_negotiation_class = ExportNegotiation

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400:  # an error is a JSON error body, whatever format the file was to be in
            response.accepted_renderer, response.accepted_media_type = renderers.JSONRenderer(), "application/json"
        return response

    @extend_schema(
        operation_id="receipts_export",
        description=f"At most {EXPORT_LIMIT:,} receipts per file, in chain order. When the selection holds more, "
                    "`Warrant-Export-Complete` is `false` and the `Link` header (rel=\"next\") names the next part: "
                    "the same query with `seq_after` set to the last receipt's seq.\n\n"
                    "`format=bundle` answers the evidence bundle of a period as a zip, whole, for compliance "
                    "(or a superuser): the receipts of the runs that finished at or after `created_after` and "
                    "before `created_before` (ISO 8601 dates or dates and times, UTC unless they say; either "
                    "may be left out), as one gap-free piece of the chain, with their runs, trace events, "
                    "approvals, the signed checkpoints, the policy versions in force, the public keys, a summary "
                    "page and a signed manifest. No other filter applies to a bundle. "
                    "Check it offline with `python -m warrant_verify BUNDLE.zip`.",
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, (200, "text/csv"): OpenApiTypes.STR,
                   (200, "application/zip"): OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter("format", str, enum=list(API_EXPORT_FORMATS), required=True),
            OpenApiParameter("seq_after", {"type": "integer", "minimum": 0, "maximum": MAX_SEQ},
                             description="Only receipts after this one in the chain: how the next part is read."),
            OpenApiParameter("Warrant-Export-Complete", str, OpenApiParameter.HEADER, response=[200], required=True,
                             enum=["true", "false"], description="false: more receipts match; see Link."),
            OpenApiParameter("Link", str, OpenApiParameter.HEADER, response=[200],
                             description='The next part, `<url>; rel="next"`, when the export is not complete.'),
        ])
    def get(self, request):
        if request.accepted_renderer.format == "bundle":
            return self._bundle(request)
        data, more = export_part(self.filter_queryset(self.get_queryset()))
        receipt_access_record(user=request.user, action="export", receipts=data, channel="api",
                              format=request.accepted_renderer.format, query=request.META.get("QUERY_STRING", ""))
        filename = f"warrant-receipts.{request.accepted_renderer.format}"
        headers = {"Content-Disposition": f'attachment; filename="{filename}"',
                   "Warrant-Export-Complete": "false" if more else "true"}
        if more:
            query = request.query_params.copy()
            query["seq_after"] = str(data[-1].seq)
            headers["Link"] = f'<{request.build_absolute_uri(request.path)}?{query.urlencode()}>; rel="next"'
        return ExportResponse(data, headers=headers)

    def _bundle(self, request):
        bounds = _bundle_bounds(request.query_params)
        try:
            plan, chunks = evidence_bundle_stream(**bounds, requested_by=request.user, channel="api")
        except EvidencePeriodError as exc:
            raise ValidationError({"created_before": [str(exc)]}) from exc
        except EvidenceAccessDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        name = "-".join(filter(None, ["warrant-evidence", _stamp(plan.period_from), _stamp(plan.period_to)]))
        return StreamingHttpResponse(chunks, content_type="application/zip", headers={
            "Content-Disposition": f'attachment; filename="{name}.zip"', "Warrant-Export-Complete": "true"})
