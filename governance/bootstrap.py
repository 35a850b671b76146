"""What every deployment starts from, demo or not: the platform's roles with the permissions each
needs, the default policies, and a first governance admin. `manage.py warrant_bootstrap` applies
it to a fresh database; the demo (runs.demo) applies the same definitions before its own data.

Idempotent, and write-free when there is nothing to do: a role, permission or policy that exists is
left as it is (a governance admin may have edited or disabled a policy since), and an existing
admin account is never touched. Every function returns what it changed, so a second run can say
it changed nothing.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from governance.models import Policy
from governance.services import policy_create

# The role that starts runs has no setting; the other three are named by settings.WARRANT.
OPERATORS_ROLE = "operators"
GOVERNANCE_ADMIN_PERMISSIONS = [
    "governance.add_policy", "governance.change_policy", "governance.view_policy",
    "governance.add_toolgrant", "governance.delete_toolgrant", "governance.view_toolgrant",
    "agents.change_agent", "agents.view_agent", "skills.add_skill", "skills.change_skill", "skills.view_skill",
    # Golden cases, and running them (evals.add_evalrun: who may run evals; compliance may by its role).
    "evals.add_goldencase", "evals.change_goldencase", "evals.delete_goldencase", "evals.view_goldencase",
    "evals.add_evalrun", "evals.view_evalrun", "evals.view_evalresult",
    # The proposals a second governance admin confirms or refuses, in the workbench as over the API.
    "agents.view_trustproposal", "evals.view_goldencaseproposal",
]
# Policies about no particular tool or agent, which hold for every agent until a governance admin
# edits or disables them. The demo adds its own (about its CRM tools) after these.
DEFAULT_POLICIES = [
    {
        "name": "no-compensation-questions", "type": "intent_guard", "priority": 10,
        "description": "Pay data is out of scope for the assistant.",
        "keywords": ["salary", "salaries", "compensation", "payroll"],
        "response": "I can't help with salary, compensation or payroll questions. Please contact HR directly.",
    },
]


def role_permissions() -> dict[str, list[str]]:
    """Every platform role by its configured name, with the "app.codename" permissions it holds."""
    warrant = settings.WARRANT
    roles = {
        OPERATORS_ROLE: ["runs.add_run"],
        warrant["TAINT_APPROVER_ROLE"]: [],  # approves side effects of tainted runs (and, by policy, others)
        warrant["COMPLIANCE_ROLE"]: [],  # reads every run and receipt: a rule of its own, not a permission
        warrant["GOVERNANCE_ADMIN_ROLE"]: list(GOVERNANCE_ADMIN_PERMISSIONS),
    }
    return {name: dotted for name, dotted in roles.items() if name}  # a role setting left empty names none


def roles_ensure() -> tuple[dict[str, Group], list[str]]:
    """The platform roles, made where missing and given their permissions; and what changed."""
    roles, changes = {}, []
    for name, dotted in role_permissions().items():
        roles[name], made = Group.objects.get_or_create(name=name)
        if made:
            changes.append(f"role {name} created")
        held = set(roles[name].permissions.values_list("content_type__app_label", "codename"))
        for app_label, codename in (d.split(".") for d in dotted):
            if (app_label, codename) not in held:
                roles[name].permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
                changes.append(f"role {name} given {app_label}.{codename}")
    return roles, changes


def policies_ensure(definitions: list[dict]) -> list[str]:
    """Create each policy no policy of that name exists for; the names of those created."""
    missing = [v for v in definitions if not Policy.objects.filter(name=v["name"]).exists()]
    for values in missing:
        policy_create(values=values)
    return [values["name"] for values in missing]


class AdminProblem(ValueError):
    """The first governance admin cannot be made as asked (the message says why)."""


def admin_ensure(*, username: str, email: str = "", password: str | None = None) -> list[str]:
    """The first governance admin: a superuser (they set up the other accounts in the workbench) in the
    governance admin role. An account of that name that exists already is left exactly as it is."""
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        return []
    if not password:
        raise AdminProblem(f"no password for the new governance admin {username!r}")
    candidate = User(username=username, email=email)
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        raise AdminProblem("the password is refused: " + " ".join(exc.messages)) from None
    user = User.objects.create_superuser(username=username, email=email, password=password)
    user.groups.add(Group.objects.get(name=settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]))
    return [f"governance admin {username} created"]


def has_governance_admin() -> bool:
    """Someone can sign in and govern: an active superuser or member of the governance admin role."""
    active = get_user_model().objects.filter(is_active=True)
    return (active.filter(is_superuser=True).exists()
            or active.filter(groups__name=settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]).exists())


@transaction.atomic
def bootstrap(*, admin: dict | None = None) -> list[str]:
    """Roles, permissions, default policies and (when `admin` names one) the first governance admin.
    Returns the changes made, empty when the database already had everything."""
    _, changes = roles_ensure()
    changes += [f"policy {name} created" for name in policies_ensure(DEFAULT_POLICIES)]
    if admin:
        changes += admin_ensure(**admin)
    return changes
