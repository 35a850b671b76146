"""The workbench's receipt pages: the chain with a verification badge per receipt, a receipt's
detail, verification, exports, and the access log every one of them writes to."""

import json
from contextvars import ContextVar

from django.contrib import admin, messages
from django.http import HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from core.permissions import reads_everything
from governance.models import Policy
from runs import selectors
from runs.access_log import receipt_access_record
from runs.admin.base import AgentFilter, RefusedFilter, RunStatusFilter, WorkbenchAdmin
from runs.model_answer import label as model_label
from runs.models import Receipt, ReceiptAccess
from runs.receipts_export import EXPORT_FORMATS, EXPORT_LIMIT, MEDIA_TYPES, export_part, receipts_export
from runs.signing import verifying_keys
from runs.templatetags.workbench import outcome_label
from runs.verification import receipt_own_problems, receipt_verify_chain, receipt_verify_since_checkpoint
from runs.verification_receipt import receipt_verify


class ReceiptAgentFilter(AgentFilter):
    field = "run__agent__slug"


class ReceiptStatusFilter(RunStatusFilter):
    title = "run status"
    field = "run__status"
    statuses = ("succeeded", "failed", "blocked", "stopped", "cancelled")


class ReceiptRefusedFilter(RefusedFilter):
    prefix = "run__"


_page_chain: ContextVar = ContextVar("warrant_receipt_chain", default=None)
_page_keys: ContextVar = ContextVar("warrant_receipt_keys", default=None)


def _chain_for(request):
    """One verification of the chain per request, shared by every badge on the page: signatures and
    links of the receipts after the newest signed checkpoint that matches the chain (the "Verify the
    whole chain" button, the verify_receipts command and the API's verify check everything)."""
    if not hasattr(request, "_warrant_chain"):
        request._warrant_chain = receipt_verify_since_checkpoint()
    return request._warrant_chain


def verification_badge(receipt: Receipt, chain) -> str:
    """The receipt's own checks (its hash, body and signature, always), then the chain's state."""
    keys = _page_keys.get()
    own = receipt_own_problems(receipt, keys=keys) if keys is not None else receipt_own_problems(receipt)
    if own:
        return format_html('<span class="wb-badge wb-bad">BROKEN: {}</span>', own[0])
    if chain.valid or (chain.seq is not None and receipt.seq < chain.seq):
        return format_html('<span class="wb-badge wb-ok">{}</span>', "Verified")
    if chain.seq is None:
        return format_html('<span class="wb-badge wb-warn">Unverifiable: {}</span>', chain.reason)
    if receipt.seq == chain.seq:
        return format_html('<span class="wb-badge wb-bad">BROKEN: {}</span>', chain.reason)
    return format_html('<span class="wb-badge wb-warn">Unverifiable: chain broken at #{}</span>', chain.seq)


@admin.register(Receipt)
class ReceiptAdmin(WorkbenchAdmin):
    """Read-only for everyone, superusers included; every page and export lands in the access log."""

    list_display = ["seq", "run_link", "agent", "caller", "run_status", "answered_by", "badge", "created_at"]
    list_filter = [ReceiptStatusFilter, ReceiptRefusedFilter, ReceiptAgentFilter, ("created_at", admin.DateFieldListFilter)]
    search_fields = ["=run__id", "hash"]
    list_select_related = ["run", "run__agent", "run__caller"]
    actions = ["verify_chain", "export_jsonl", "export_csv"]
    change_list_template = "admin/runs/receipt/change_list.html"

    def has_module_permission(self, request):
        return reads_everything(request.user) and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def get_queryset(self, request):
        return selectors.receipts_visible_to(request.user).select_related("run__agent", "run__caller")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # no bulk delete, for superusers too
        return actions

    @admin.display(description="run")
    def run_link(self, receipt):
        return format_html('<a href="{}">{}</a>', reverse("admin:runs_run_change", args=[receipt.run_id]),
                           str(receipt.run_id)[:8])

    @admin.display(description="agent")
    def agent(self, receipt):
        return receipt.run.agent.slug

    @admin.display(description="caller")
    def caller(self, receipt):
        return receipt.run.caller.get_username()

    @admin.display(description="run status")
    def run_status(self, receipt):
        return outcome_label(receipt.run.status, receipt.run.refused_count)

    @admin.display(description="answered by")
    def answered_by(self, receipt):
        return model_label(receipt.run)  # a fallback, as the receipt's model_calls record it

    @admin.display(description="verification")
    def badge(self, receipt):
        return verification_badge(receipt, _page_chain.get() or receipt_verify_since_checkpoint())

    def changelist_view(self, request, extra_context=None):
        chain = _chain_for(request)
        token, keys_token = _page_chain.set(chain), _page_keys.set(verifying_keys())
        try:
            response = super().changelist_view(request, extra_context={
                **(extra_context or {}), "chain": chain, "export_query": request.GET.urlencode(),
            })
            if hasattr(response, "render"):
                response.render()  # the badges read the chain while the page renders
        finally:
            _page_chain.reset(token)
            _page_keys.reset(keys_token)
        cl = response.context_data.get("cl") if hasattr(response, "context_data") else None
        if cl is not None:
            receipt_access_record(user=request.user, action=ReceiptAccess.Action.LIST, receipts=cl.result_list,
                                  channel="admin", query=request.GET.urlencode())
        return response

    def get_urls(self):
        return [
            path("export/", self.admin_site.admin_view(self.export_view), name="runs_receipt_export"),
            path("verify-chain/", self.admin_site.admin_view(self.verify_chain_view), name="runs_receipt_verify_chain"),
            path("<uuid:receipt_id>/verify/", self.admin_site.admin_view(self.verify_view), name="runs_receipt_verify"),
        ] + super().get_urls()

    # Reads ---------------------------------------------------------------------------------

    def _detail(self, request, receipt: Receipt, *, verified=None):
        body = json.loads(receipt.body)
        names = dict(Policy.objects.filter(id__in=[p["id"] for p in body.get("policies_fired", [])]).values_list("id", "name"))
        for fired in body.get("policies_fired", []):
            fired["name"] = names.get(fired["id"])  # for display only; the body itself is untouched
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": f"Receipt #{receipt.seq}",
            "receipt": receipt, "body": body, "body_pretty": json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False),
            "badge": verification_badge(receipt, _chain_for(request)), "verified": verified,
            "status": outcome_label(body["status"], (body.get("outcome") or {}).get("refused", 0)),
        }
        return TemplateResponse(request, "admin/runs/receipt/detail.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if not self.has_view_permission(request):
            return redirect("admin:index")
        receipt = get_object_or_404(self.get_queryset(request), pk=object_id)
        receipt_access_record(user=request.user, action=ReceiptAccess.Action.VIEW, receipts=[receipt], channel="admin")
        return self._detail(request, receipt)

    def verify_view(self, request, receipt_id):
        if not self.has_view_permission(request):
            return redirect("admin:index")
        receipt = get_object_or_404(self.get_queryset(request), pk=receipt_id)
        result = receipt_verify(receipt=receipt)
        receipt_access_record(user=request.user, action=ReceiptAccess.Action.VERIFY, receipts=[receipt], channel="admin")
        return self._detail(request, receipt, verified=result)

    def verify_chain_view(self, request):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            return redirect("admin:index")
        self._report_chain(request, receipt_verify_chain(), receipts=[])
        return redirect("admin:runs_receipt_changelist")

    def export_view(self, request):
        """Export what the changelist shows under the same filters (no JavaScript needed)."""
        if not self.has_view_permission(request):
            return redirect("admin:index")
        params = request.GET.copy()
        format_ = params.pop("format", [""])[-1]
        if format_ not in EXPORT_FORMATS:
            messages.error(request, f"Choose an export format: {' or '.join(EXPORT_FORMATS)}.")
            return redirect("admin:runs_receipt_changelist")
        request.GET = params
        queryset = self.get_changelist_instance(request).get_queryset(request)
        return self._export(request, queryset, format_)

    # Actions -------------------------------------------------------------------------------

    def _report_chain(self, request, result, *, receipts) -> None:
        receipt_access_record(user=request.user, action=ReceiptAccess.Action.VERIFY_CHAIN, receipts=receipts,
                              channel="admin")
        if result.valid:
            self.message_user(request, f"Evidence verified: {result.reason}.", messages.SUCCESS)
            return
        shown = result.failures[:20]
        self.message_user(request, f"Evidence BROKEN: {len(result.failures)} failure(s) in {result.checked} "
                                   "receipt(s) read.", messages.ERROR)
        for problem in shown:
            self.message_user(request, str(problem), messages.ERROR)
        if len(result.failures) > len(shown):
            self.message_user(request, f"... and {len(result.failures) - len(shown)} more: run manage.py "
                                       "verify_receipts for the whole list.", messages.ERROR)

    @admin.action(description="Verify the chain up to the selected receipts")
    def verify_chain(self, request, queryset):
        receipts = list(queryset.order_by("seq"))
        self._report_chain(request, receipt_verify_chain(upto_seq=receipts[-1].seq), receipts=receipts)

    @admin.action(description="Export selected as JSON lines")
    def export_jsonl(self, request, queryset):
        return self._export(request, queryset, "jsonl")

    @admin.action(description="Export selected as CSV (formulas neutralised)")
    def export_csv(self, request, queryset):
        return self._export(request, queryset, "csv")

    def _export(self, request, queryset, format_: str) -> HttpResponse:
        receipts, more = export_part(queryset)
        if more:
            # Half an export that looks whole is worse than none: say so, and how to get all of it.
            messages.error(request, f"{queryset.count():,} receipts are selected; an export file holds at most "
                                    f"{EXPORT_LIMIT:,}. Nothing was exported. Narrow the filter (dates, agent, status), "
                                    "or export in parts over the API (GET /api/v1/receipts/export/ follows its Link "
                                    "header to the next part).")
            return redirect(f"{reverse('admin:runs_receipt_changelist')}?{request.GET.urlencode()}")
        receipt_access_record(user=request.user, action=ReceiptAccess.Action.EXPORT, receipts=receipts,
                              channel="admin", format=format_, query=request.GET.urlencode())
        response = HttpResponse(receipts_export(receipts, format=format_), content_type=f"{MEDIA_TYPES[format_]}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="warrant-receipts.{format_}"'
        return response


@admin.register(ReceiptAccess)
class ReceiptAccessAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "username", "action", "channel", "format", "count", "receipts", "query"]
    list_filter = ["action", "channel", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["username"]

    @admin.display(description="receipts")
    def receipts(self, entry):
        shown = ", ".join(i[:8] for i in entry.receipt_ids[:5])
        return shown + (f" and {entry.count - 5} more" if entry.count > 5 else "") if shown else "-"

    def has_module_permission(self, request):
        return reads_everything(request.user) and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)
