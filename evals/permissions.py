"""Who may run evals and read their results: governance admins (the evals.add_evalrun permission,
which warrant_bootstrap gives their role) and compliance (by its role, as it reads every run).
Golden cases are read by the same people and written by governance admins only."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from core.access import has_model_permission
from core.permissions import is_governance_admin, reads_everything


def may_run_evals(user) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return reads_everything(user) or has_model_permission(user, "evals.add_evalrun")


class CanRunEvals(BasePermission):
    message = "only governance admins and compliance may run evals"

    def has_permission(self, request, view) -> bool:
        return may_run_evals(request.user)


class ReadEvalsWriteGovernanceAdmin(BasePermission):
    message = "only governance admins may change golden cases"

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return may_run_evals(request.user)
        return is_governance_admin(request.user)
