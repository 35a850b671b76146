"""Admin bases every app's admin shares."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """For append-only records (versions, events, receipts, access logs): shown, never edited."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
