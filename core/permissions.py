"""Who may do what, as small composable pieces. Roles are Django groups."""

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission

from core import stamp as governance_stamp
from core.access import has_model_permission


def compliance_role() -> str:
    return settings.WARRANT.get("COMPLIANCE_ROLE", "compliance")


def in_role(user, role: str) -> bool:
    return bool(user and user.is_authenticated and user.groups.filter(name=role).exists())


def reads_everything(user) -> bool:
    """Compliance staff (and superusers) read every run and receipt."""
    return bool(user.is_superuser or in_role(user, compliance_role()))


def is_governance_admin(user) -> bool:
    return bool(user and user.is_authenticated and (user.is_superuser or in_role(user, settings.WARRANT["GOVERNANCE_ADMIN_ROLE"])))


class CanStartRuns(BasePermission):
    """Holds the runs.add_run permission (the operators role in the demo)."""

    message = "your roles may not start runs"

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        # Answered from what the governance stamp keeps (has_perm reads two joins every time). The
        # stamp read with the token (governance.auth.ApiTokenAuthentication), or else here, is the moment the
        # run is asked for: the view freezes the run's governance at it.
        request.governance_stamp = getattr(request.auth, "governance_stamp", None) or governance_stamp.current()
        return has_model_permission(request.user, "runs.add_run", stamp=request.governance_stamp)


class HasARole(BasePermission):
    """Belongs to at least one role: someone Warrant knows what to show."""

    message = "you have no role in Warrant"

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated
                    and (request.user.is_superuser or request.user.groups.exists()))


class IsGovernanceAdmin(BasePermission):
    """Member of the governance admin role (or a superuser)."""

    message = "only governance admins may change this"

    def has_permission(self, request, view) -> bool:
        return is_governance_admin(request.user)


class ReadAnyRoleWriteGovernanceAdmin(BasePermission):
    """Reads for anyone with a role; writes for governance admins only."""

    message = "only governance admins may change this"

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return HasARole().has_permission(request, view)
        return is_governance_admin(request.user)
