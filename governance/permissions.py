"""Who may do what, as small composable pieces. Roles are Django groups."""

from django.conf import settings
from rest_framework.permissions import BasePermission


def compliance_role() -> str:
    return settings.WARRANT.get("COMPLIANCE_ROLE", "compliance")


def reads_everything(user) -> bool:
    """Compliance staff (and superusers) read every run and receipt."""
    return bool(user.is_superuser or user.groups.filter(name=compliance_role()).exists())


class CanStartRuns(BasePermission):
    """Holds the runs.add_run permission (the operators role in the demo)."""

    message = "your roles may not start runs"

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.has_perm("runs.add_run"))
