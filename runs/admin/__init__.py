"""The runs side of the compliance workbench: approval queue, runs with their timeline, receipts.

Views are thin: decisions go through runs.approvals.approval_decide, reads through runs.selectors,
verification through runs.verification, exports through runs.receipts_export. Every look at a
receipt is written to the access log. A read changes nothing: overdue requests are the
reconciler's (runs.reconcile). One module a page family: run_pages, approval_queue, receipt_pages.
"""

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError

from runs.admin import approval_queue, notices, receipt_pages, run_pages, standing  # noqa: F401  (they register their admins)


class WorkbenchLoginForm(AdminAuthenticationForm):
    """Someone who signed in correctly but has no place in the workbench is told so, not that the
    password was wrong (they proved who they are; what they lack is a role here)."""

    def confirm_login_allowed(self, user):
        if user.is_active and not user.is_staff:
            raise ValidationError(
                "You are signed in correctly, but the workbench is for approvers, compliance officers and "
                "governance admins, and your account is none of those. Operators start and read runs through "
                "the API (see /api/v1/docs/).", code="not_staff")
        super().confirm_login_allowed(user)


admin.site.login_form = WorkbenchLoginForm

# The app list in a sidebar costs a third of a laptop screen on every page; the workbench nav replaces it.
admin.site.enable_nav_sidebar = False
admin.site.site_header = admin.site.site_title = "Warrant"
