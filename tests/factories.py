"""Small builders for test data: an agent with a published version, its tools, roles and their grants,
policies, and the people who use them. Plain functions over the services the app itself calls.

Each builder makes exactly what its arguments ask for and nothing else, so a test that uses them
does not depend on the demo. Names default to fresh ones (a counter), and roles are looked up by
name before one is made: the demo's "operators" and the factories' "operators" are the same group,
so a test may also mix the two.
"""

import itertools

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from rest_framework.test import APIClient

from agents.models import Agent, ModelProfile, Tool
from agents.services import agent_publish
from governance.models import Policy, ToolGrant
from governance.bootstrap import GOVERNANCE_ADMIN_PERMISSIONS, OPERATORS_ROLE
from governance.services import policy_create

_serial = itertools.count(1)

# What each kind of person needs, by the role names settings.WARRANT uses by default.
CALLER_ROLE = OPERATORS_ROLE
APPROVER_ROLE = "secops"
COMPLIANCE_ROLE = "compliance"
GOVERNANCE_ADMIN_ROLE = "governance-admins"
ROLE_PERMISSIONS = {CALLER_ROLE: ["runs.add_run"], GOVERNANCE_ADMIN_ROLE: list(GOVERNANCE_ADMIN_PERMISSIONS)}


def fresh(prefix: str) -> str:
    """A name no other builder call in this process has returned."""
    return f"{prefix}-{next(_serial)}"


def role(name: str, *permissions: str) -> Group:
    """The role (a Django group) of that name, made if missing, holding these "app.codename" permissions
    and, for the names above, the ones that role needs."""
    group, _ = Group.objects.get_or_create(name=name)
    for dotted in (*ROLE_PERMISSIONS.get(name, []), *permissions):
        app_label, codename = dotted.split(".")
        group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return group


def user(username: str | None = None, *, roles: tuple[str, ...] = (), staff: bool = False,
         superuser: bool = False, password: str = "x"):
    """A user in these roles. Staff may sign in to the admin (approvers and compliance work there)."""
    person = get_user_model().objects.create_user(
        username or fresh("user"), email="", password=password,
        is_staff=staff or superuser, is_superuser=superuser)
    person.groups.add(*(role(name) for name in roles))
    return person


def caller(username: str | None = None, *, roles: tuple[str, ...] = (CALLER_ROLE,)):
    """Someone who may start runs."""
    return user(username or fresh("caller"), roles=roles)


def approver(username: str | None = None, *, roles: tuple[str, ...] = (APPROVER_ROLE,)):
    """A member of the role that approval policies (and tainted runs) name as approver."""
    return user(username or fresh("approver"), roles=roles, staff=True)


def compliance_officer(username: str | None = None):
    """Reads every run and receipt."""
    return user(username or fresh("compliance"), roles=(COMPLIANCE_ROLE,), staff=True)


def governance_admin(username: str | None = None, *, superuser: bool = False):
    """Changes policies, grants, agents and skills."""
    return user(username or fresh("govadmin"), roles=(GOVERNANCE_ADMIN_ROLE,), staff=True, superuser=superuser)


def made_in_admin(browser: Client, username: str):
    """An account `browser`'s superuser makes on the workbench's add page (so the admin log records
    who made it), with a password and no roles."""
    made = browser.post("/admin/auth/user/add/", {"username": username, "password1": "puppet-pass-123",
                                                  "password2": "puppet-pass-123", "usable_password": "true"})
    assert made.status_code == 302, made.content[:500]
    return get_user_model().objects.get(username=username)


def roles_set_in_admin(browser: Client, account, *role_names: str, staff: bool = False) -> None:
    """`browser`'s superuser puts `account` in exactly `role_names` on its change page (logged)."""
    changed = browser.post(f"/admin/auth/user/{account.pk}/change/", {
        "username": account.username, "is_active": "on", **({"is_staff": "on"} if staff else {}),
        "groups": [Group.objects.get(name=name).pk for name in role_names],
        "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00", "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00"})
    assert changed.status_code == 302, changed.content[:2000]


def api_client(person) -> APIClient:
    """An API client authenticated as this person."""
    client = APIClient()
    client.force_authenticate(person)
    return client


def browser(person) -> Client:
    """A test-client session signed in as this person (the admin, the pages)."""
    client = Client()
    client.force_login(person)
    return client


def tool(name: str | None = None, *, handler: str = "agents.tools.calculator.calculator",
         side_effect: bool = False, input_schema: dict | None = None, **fields) -> Tool:
    """A Python tool; by default the calculator's handler under a name of its own."""
    return Tool.objects.create(
        name=name or fresh("tool").replace("-", "_"), description=fields.pop("description", "A tool for a test."),
        handler=handler, side_effect=side_effect,
        input_schema=input_schema if input_schema is not None else {"type": "object"}, **fields)


def grant(role_name: str, *tools: Tool) -> list[ToolGrant]:
    """Members of the role may use these tools (if the agent carries them)."""
    group = role(role_name)
    return [ToolGrant.objects.get_or_create(role=group, tool=t)[0] for t in tools]


def model_profile(name: str | None = None, *, backend: str = "scripted", model: str | None = None,
                  **fields) -> ModelProfile:
    """A model profile; reused when one of that name exists (profiles are shared by agents)."""
    profile, _ = ModelProfile.objects.get_or_create(
        name=name or backend, defaults={"backend": backend, "model": model or f"{backend}-1", **fields})
    return profile


def agent(slug: str | None = None, *, tools: tuple[Tool, ...] | list[Tool] = (), backend: str = "scripted",
          instructions: str = "Answer from the tools' results.", publish: bool = True, **fields) -> Agent:
    """An agent carrying these tools, with a published version unless publish=False."""
    slug = slug or fresh("agent")
    made = Agent.objects.create(slug=slug, name=fields.pop("name", slug), instructions=instructions,
                                model_profile=fields.pop("model_profile", None) or model_profile(backend=backend),
                                **fields)
    made.tools.set(list(tools))
    if publish:
        agent_publish(agent=made)
    return made


def replay_agent(*tools: Tool, slug: str = "replayer") -> Agent:
    """An agent whose model follows the script given as the run's input (tests/runs/backends.py),
    carrying these tools, published."""
    return agent(slug, tools=tools, backend="replay", instructions="Follow the script.", name="Replayer")


def carry(made: Agent, *tools: Tool) -> Agent:
    """The agent also carries these tools, published as its next version."""
    made.tools.add(*tools)
    agent_publish(agent=made)
    return made


def policy(name: str | None = None, *, type: str = "intent_guard", **values) -> Policy:
    """A policy made through the service (validated, versioned), e.g.
    policy(type="tool_approval", target_tools=["send_email"], approver_role="secops")."""
    if type == "intent_guard":
        values.setdefault("keywords", ["forbidden"])
        values.setdefault("response", "That is out of scope.")
    return policy_create(values={"name": name or fresh("policy"), "type": type, **values})


def two_admins_change_case(proposer: APIClient, approver: APIClient, method: str, url: str, data=None):
    """A golden case's edit, deletion or recording through the API as it goes (evals.proposals):
    proposed by one governance admin (202, nothing changed yet), approved by another; the approval's
    answer (the proposal, approved). Asserts each step answered as it must."""
    proposed = getattr(proposer, method)(url, data, format="json")
    assert proposed.status_code == 202, proposed.json()
    approved = approver.post(f"/api/v1/evals/case-proposals/{proposed.json()['id']}/approve/")
    assert approved.status_code == 200, approved.json()
    return approved
