"""The workbench's home and compliance review pages.

The admin index shows the dashboard above the app list to compliance and governance staff
(review.views.may_see_dashboard); to everyone else it is the index it was. Sampling rules are
edited here; the review queue is ReviewItem's list, and a sampled run's review page shows its
receipt, its trace and their verification side by side, with the forms to assign it and to
submit a record (review.records does the writing). Records are read-only.

A rule's change or deletion goes through review.rules as the API's does: saving one that would
sample fewer runs, or deleting, makes a proposal (the page says so) and leaves the rule as it was.
"""

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError
from core.permissions import compliance_role
from review import rules
from review.models import ReviewItem, ReviewRecord, SamplingRule, SamplingRuleProposal, Trigger
from review.records import ineligible, review_assign, review_submit
from review.verification import review_verify_chain
from review.views import may_see_dashboard
from runs.verification_receipt import receipt_verify

admin.site.index_template = "review/index.html"


class ComplianceOnly:
    """Compliance, governance admins and superusers, whatever their model permissions."""

    def has_module_permission(self, request):
        return may_see_dashboard(request.user)

    def has_view_permission(self, request, obj=None):
        return may_see_dashboard(request.user)


class SamplingRuleForm(forms.ModelForm):
    always = forms.MultipleChoiceField(choices=Trigger.choices, required=False, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = SamplingRule
        fields = ["name", "agent", "percentage", "always", "tools", "enabled", "note"]


@admin.register(SamplingRule)
class SamplingRuleAdmin(ComplianceOnly, admin.ModelAdmin):
    form = SamplingRuleForm
    list_display = ["name", "agent_label", "percentage", "triggers", "enabled", "updated_at"]
    list_filter = ["enabled"]
    readonly_fields = ["seed", "created_by", "created_at", "updated_at"]

    def has_add_permission(self, request):
        return may_see_dashboard(request.user)

    def has_change_permission(self, request, obj=None):
        return may_see_dashboard(request.user)

    def has_delete_permission(self, request, obj=None):
        return may_see_dashboard(request.user)

    @admin.display(description="agent")
    def agent_label(self, rule):
        return rule.agent.slug if rule.agent else "every agent"

    @admin.display(description="always samples")
    def triggers(self, rule):
        return ", ".join(rule.always) or "-"

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one proposal a rule, from its own page
        return actions

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
            rules.rule_add(obj)
            return
        # obj holds the form's values already; the service reads the row as stored and judges the change.
        result = rules.rule_update(obj, {f: form.cleaned_data[f] for f in form.changed_data}, user=request.user)
        request.rule_proposal = result if isinstance(result, SamplingRuleProposal) else None

    def delete_model(self, request, obj):
        request.rule_proposal = rules.rule_delete(obj, user=request.user)

    def log_change(self, request, obj, message):
        if getattr(request, "rule_proposal", None) is None:
            return super().log_change(request, obj, message)
        return None  # nothing changed

    def log_deletions(self, request, queryset):
        return []  # nothing is deleted: a proposal is made

    def _proposed(self, request):
        proposal = request.rule_proposal
        messages.warning(request, f"Nothing changed yet: this {', '.join(proposal.loosens)}, so it is proposal "
                                  f"{proposal.pk}, which another {rules.CONFIRMER} approves "
                                  f"(POST /api/v1/review/rule-proposals/{proposal.pk}/approve/).")
        return redirect("admin:review_samplingrule_changelist")

    def response_change(self, request, obj):
        if getattr(request, "rule_proposal", None) is not None:
            return self._proposed(request)
        return super().response_change(request, obj)

    def response_delete(self, request, obj_display, obj_id):
        return self._proposed(request)


@admin.register(SamplingRuleProposal)
class SamplingRuleProposalAdmin(ComplianceOnly, ReadOnlyAdmin):
    """Read here; decided through the API (review/rule-proposals/{id}/approve|refuse|withdraw)."""

    list_display = ["id", "rule_name", "kind", "loosens", "proposed_by", "created_at", "status", "decided_by"]
    list_filter = ["status", "kind"]


class RecordForm(forms.Form):
    kind = forms.ChoiceField(choices=ReviewRecord.Kind.choices)
    severity = forms.ChoiceField(choices=[("", "-")] + ReviewRecord.Severity.choices, required=False)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    resolves = forms.BooleanField(required=False, label="Resolves the finding")


@admin.register(ReviewItem)
class ReviewItemAdmin(ComplianceOnly, ReadOnlyAdmin):
    list_display = ["sampled_at", "run_link", "agent", "why", "state", "assignee"]
    list_filter = ["state", "assignee"]
    list_select_related = ["run__agent", "assignee"]
    search_fields = ["run__id"]

    @admin.display(description="run")
    def run_link(self, item):
        return format_html('<a href="{}">{}</a>', reverse("admin:review_reviewitem_change", args=[item.pk]),
                           str(item.run_id)[:8])

    @admin.display(description="agent")
    def agent(self, item):
        return item.run.agent.slug

    @admin.display(description="why sampled")
    def why(self, item):
        return "; ".join(f"{r['rule']}: {r['reason']}" for r in item.reasons)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return self.review_view(request, object_id)

    def review_view(self, request, item_id):
        if not may_see_dashboard(request.user):
            return redirect("admin:index")
        item = get_object_or_404(ReviewItem.objects.select_related("run__agent", "run__caller", "receipt", "assignee"),
                                 pk=item_id)
        if request.method == "POST":
            self._act(request, item)
            return redirect("admin:review_reviewitem_change", item.pk)
        receipt = item.receipt
        body = json.loads(receipt.body)
        events = list(item.run.events.order_by("seq").values("seq", "step", "kind", "data"))
        for event in events:
            event["summary"] = json.dumps(event["data"], sort_keys=True)[:240]
        people = get_user_model().objects.filter(groups__name=compliance_role(), is_active=True).order_by("username")
        context = {
            **self.admin_site.each_context(request), "title": f"Review of run {item.run_id}", "item": item,
            "receipt": receipt, "body": body, "body_json": json.dumps(body, indent=2, sort_keys=True),
            "events": events, "verified": receipt_verify(receipt=receipt), "chain": review_verify_chain(),
            "records": item.records.select_related("reviewer").order_by("seq"), "record_form": RecordForm(),
            "eligible": [u for u in people if ineligible(item, u) is None],
            "mine": item.assignee_id == request.user.pk, "opts": self.model._meta,
        }
        return TemplateResponse(request, "review/item.html", context)

    def _act(self, request, item):
        try:
            if "assign" in request.POST:
                name = request.POST.get("assignee") or ""
                assignee = get_user_model().objects.filter(username=name).first() if name else None
                review_assign(item=item, assignee=assignee, by=request.user)
                messages.success(request, f"Assigned to {name}." if assignee else "Back in the pool.")
                return
            form = RecordForm(request.POST)
            if not form.is_valid():
                messages.error(request, f"Not submitted: {form.errors.as_text()}")
                return
            record = review_submit(item=item, reviewer=request.user, **form.cleaned_data)
            messages.success(request, f"Record #{record.seq} ({record.kind}) sealed into the review chain.")
        except DomainError as exc:
            messages.error(request, exc.message)


@admin.register(ReviewRecord)
class ReviewRecordAdmin(ComplianceOnly, ReadOnlyAdmin):
    list_display = ["seq", "kind", "severity", "reviewer", "run_id", "created_at"]
    list_filter = ["kind", "severity"]
    readonly_fields = ["item", "run", "reviewer", "kind", "severity", "note", "follows", "resolves", "seq", "prev_hash",
                       "hash", "body", "key_id", "signature", "created_at"]
