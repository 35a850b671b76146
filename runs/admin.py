from django.contrib import admin

from agents.admin import ReadOnlyAdmin
from runs.models import ApprovalRequest, Receipt, Run, RunEvent, SideEffect


class RunEventInline(admin.TabularInline):
    model = RunEvent
    fields = ["seq", "step", "kind", "data", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "agent", "caller", "status", "stop_reason", "error", "created_at"]
    list_filter = ["status", "agent", "tainted"]
    search_fields = ["id", "input", "caller__username"]
    inlines = [RunEventInline]

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "kind", "created_at"]
    list_filter = ["kind"]


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ["tool", "run", "approver_role", "status", "decided_by", "expires_at", "created_at"]
    list_filter = ["status", "approver_role"]


@admin.register(SideEffect)
class SideEffectAdmin(ReadOnlyAdmin):
    list_display = ["idempotency_key", "tool", "status", "attempts", "created_at"]
    list_filter = ["status", "tool"]


@admin.register(Receipt)
class ReceiptAdmin(ReadOnlyAdmin):
    list_display = ["seq", "run", "hash", "created_at"]
    readonly_fields = ["id", "run", "seq", "prev_hash", "hash", "body", "created_at"]

    def get_actions(self, request):
        return {}  # no bulk delete, for superusers too
