"""The workbench's API tokens (read, revoke) and user accounts."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied

from core.admin import ReadOnlyAdmin
from governance.models import ApiToken
from governance.tokens import token_revoke, token_state


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Who holds which token, since when, until when, last used: never a key, which is not
    stored. No one issues a token here, for themselves or anyone else (a key for another user
    would let its issuer act, and approve, as them): owners issue theirs through the API, server
    operators with `manage.py issue_token`. Tokens are revoked, never deleted, so the
    `token:<id>` a decision names stays traceable."""

    list_display = ["public_id", "user", "name", "state", "issued_via", "issued_by", "created_at", "expires_at",
                    "last_used_at", "revoked_at", "revoked_by"]
    list_filter = ["issued_via", ("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["public_id", "user__username", "name"]
    list_select_related = ["user"]
    fields = ["public_id", "user", "name", "state", "issued_via", "issued_by", "created_at", "expires_at",
              "last_used_at", "revoked_at", "revoked_by"]
    readonly_fields = fields
    actions = ["revoke"]

    @admin.display(description="state")
    def state(self, token):
        return {"active": "Active", "expired": "Expired", "revoked": "Revoked"}[token_state(token)]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            token_revoke(token=token, by=request.user.get_username())
            count += 1
        messages.success(request, f"Revoked {count} token(s); they stop working at once.")




admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class AccountAdmin(UserAdmin):
    """Django's user admin, except that no one sets another user's password here, superusers
    included: that would let them sign in, and approve, as that user. A forgotten password is
    reset from the server's shell (`manage.py changepassword USERNAME`), by an operator. Nor is an
    account deleted here: it is made inactive."""

    def user_change_password(self, request, id, form_url=""):
        if str(request.user.pk) != str(id):
            raise PermissionDenied("No one sets another user's password in the workbench; "
                                   "a server operator resets it with manage.py changepassword.")
        return super().user_change_password(request, id, form_url)

    def has_delete_permission(self, request, obj=None):
        # The admin log goes with a deleted account (cascade), and core.four_eyes reads who set up whose
        # account from it: deleting a go-between would turn the account it made into a second admin.
        # An account is retired by unticking "active".
        return False
