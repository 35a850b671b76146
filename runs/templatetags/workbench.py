"""The workbench's navigation and the pending counts on the admin index."""

import json

from django import template
from django.urls import reverse
from django.utils.html import format_html

from core.permissions import is_governance_admin, reads_everything
from runs import selectors

register = template.Library()

STATUS_TEXT = {
    "queued": "Queued", "running": "Running", "awaiting_approval": "Awaiting approval",
    "awaiting_budget": "Awaiting budget", "succeeded": "Succeeded",
    "failed": "Failed", "blocked": "Blocked", "stopped": "Stopped", "cancelled": "Cancelled",
    "pending": "Pending", "approved": "Approved", "denied": "Denied", "expired": "Expired",
}


@register.filter
def status_label(status: str):
    """A status as words in a tinted box: the words carry the meaning, the colour only repeats it."""
    return format_html('<span class="wb-status wb-status-{}">{}</span>', status, STATUS_TEXT.get(status, status))


@register.filter
def outcome_label(status: str, refused=0):
    """A run's status with what it was refused: "Succeeded · 1 refused" in amber, not green, since
    the run did not do all it set out to do. Other statuses keep their colour and gain the count."""
    refused = int(refused or 0)
    if not refused:
        return status_label(status)
    css = "wb-warn" if status == "succeeded" else f"wb-status-{status}"
    return format_html('<span class="wb-status {} wb-refused" title="{} action(s) refused">{} · {} refused</span>', css,
                       refused, STATUS_TEXT.get(status, status), refused)


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


@register.inclusion_tag("admin/workbench_nav.html")
def workbench_nav(user):
    if not (user.is_authenticated and selectors.workbench_member(user)):
        return {"links": []}
    pending = sum(count for _, count in selectors.pending_counts_by_role(user))
    links = [("Approval queue", reverse("admin:runs_approval_queue"), pending),
             ("Runs", reverse("admin:runs_run_changelist"), None),
             ("Standing approvals", reverse("admin:runs_standingapproval_changelist"), None)]
    if reads_everything(user):
        links += [("Receipts", reverse("admin:runs_receipt_changelist"), None),
                  ("Receipt access log", reverse("admin:runs_receiptaccess_changelist"), None)]
    if is_governance_admin(user):
        links += [("Policies", reverse("admin:governance_policy_changelist"), None),
                  ("Policy lab", reverse("admin:governance_policy_lab"), None),
                  ("Roles and grants", reverse("admin:governance_role_overview"), None),
                  ("Skills", reverse("admin:skills_skill_changelist"), None)]
    if reads_everything(user) or is_governance_admin(user):  # the dashboard is their home (review/)
        links.insert(0, ("Dashboard", reverse("admin:index"), None))
    return {"links": links}


@register.simple_tag
def pending_by_role(user):
    return selectors.pending_counts_by_role(user) if selectors.workbench_member(user) else []
