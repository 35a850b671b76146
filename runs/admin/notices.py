"""Notices that failed and are sent again (runs.notify_retry), for the people who run the
workbench: governance admins and compliance read them, nobody edits them. A notice's text is
not kept, only which request, event, channel and recipient, so nothing here says more than the
request's own page."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from core.permissions import is_governance_admin, reads_everything
from runs.notice_models import NoticeRetry


@admin.register(NoticeRetry)
class NoticeRetryAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "event", "channel", "recipient", "approval", "state", "attempts", "next_attempt_at",
                    "last_error"]
    list_filter = ["state", "channel", "event"]
    list_select_related = ["recipient", "approval"]

    def has_view_permission(self, request, obj=None):
        return is_governance_admin(request.user) or reads_everything(request.user)

    def has_module_permission(self, request):
        return self.has_view_permission(request)
