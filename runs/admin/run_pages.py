"""The workbench's run pages: the runs list, a run's timeline, and the raw events and side effects."""

from django.contrib import admin
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from core.admin import ReadOnlyAdmin
from core.permissions import reads_everything
from runs import outcome_refusals, selectors
from runs.admin.base import AgentFilter, RefusedFilter, RunStatusFilter, WorkbenchAdmin
from runs.model_answer import label as model_label
from runs.models import Receipt, Run, RunEvent, SideEffect
from runs.templatetags.workbench import outcome_label


@admin.register(Run)
class RunAdmin(WorkbenchAdmin):
    list_display = ["short_id", "request_text", "agent", "caller", "status_text", "outcome", "answered_by", "tainted_text",
                    "created_at"]
    list_filter = [RunStatusFilter, RefusedFilter, AgentFilter, ("caller", admin.RelatedOnlyFieldListFilter),
                   ("created_at", admin.DateFieldListFilter), "tainted"]
    search_fields = ["id", "input", "caller__username"]
    date_hierarchy = "created_at"
    list_select_related = ["agent", "caller"]

    def get_queryset(self, request):
        return selectors.runs_visible_in_admin(request.user)

    @admin.display(description="run", ordering="created_at")
    def short_id(self, run):
        return str(run.id)[:8]

    @admin.display(description="request")
    def request_text(self, run):
        return run.input if len(run.input) <= 70 else run.input[:69] + "…"

    @admin.display(description="status", ordering="status")
    def status_text(self, run):
        return outcome_label(run.status, run.refused_count)

    @admin.display(description="stop reason / error")
    def outcome(self, run):
        return run.stop_reason or run.error or "-"

    @admin.display(description="answered by")
    def answered_by(self, run):
        # The profile that answered; a fallback is said out loud, not left to the trace (runs.model_answer).
        return model_label(run)

    @admin.display(description="tainted", ordering="tainted")
    def tainted_text(self, run):
        return "TAINTED" if run.tainted else "no"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = get_object_or_404(self.get_queryset(request), pk=object_id)
        events = list(RunEvent.objects.filter(run=run).order_by("seq"))
        approvals = list(run.approvals.select_related("approver_role", "decided_by").order_by("created_at"))
        receipt = Receipt.objects.filter(run=run).first()
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": f"Run {str(run.id)[:8]}",
            "run": run, "status": outcome_label(run.status, run.refused_count), "events": events, "approvals": approvals,
            # Only an ended run wrote what it was refused; one still going shows none yet.
            "refused": outcome_refusals.of_run(run) if run.finished_at else [],
            "receipt": receipt, "taint_reasons": run.state.get("taint_reasons", []),
            "tainted": bool(run.state.get("tainted")) or run.tainted,
            "receipt_url": reverse("admin:runs_receipt_change", args=[receipt.pk]) if receipt and reads_everything(
                request.user) else None,
        }
        return TemplateResponse(request, "admin/runs/run/timeline.html", context)


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "kind", "created_at"]
    list_filter = ["kind"]


@admin.register(SideEffect)
class SideEffectAdmin(ReadOnlyAdmin):
    list_display = ["idempotency_key", "tool", "status", "attempts", "created_at"]
    list_filter = ["status", "tool"]
