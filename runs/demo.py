"""The demo of docs/design.md: CRM data, tools, roles, users, policies, skills and the crm-assistant.

Idempotent: loading twice changes nothing (passwords are set only when a user is created).
"""

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from agents.demo_data import TOOL_DEFINITIONS, TRUSTED_OUTPUT, load_crm
from agents import demo_model
from agents.models import Agent, Tool, TrustChange
from agents.services import agent_publish
from agents.trust import tool_trust
from governance.bootstrap import DEFAULT_POLICIES, policies_ensure, roles_ensure
from governance.models import ToolGrant
from skills.models import Skill
from skills.services import HELD, skill_import_report

DEMO_USERS = {
    "operator": ["operators"],
    "approver": ["secops"],
    "compliance": ["compliance"],
    "admin": ["governance-admins"],
}
INSTRUCTIONS = (
    "You are the CRM assistant of a customer success team. Answer from the tools' results only, "
    "cite knowledge-base passages by id, and never invent numbers. Side effects (emails, deletions) "
    "are reviewed by a human before they happen."
)
# The platform's default policies first (governance.bootstrap), then the demo's, about its CRM tools.
POLICIES = [
    *DEFAULT_POLICIES,
    {
        "name": "churn-risk-playbook", "type": "playbook", "priority": 50,
        "description": "How to answer questions about churn risk.",
        "keywords": ["churn", "churning", "at risk"],
        "content": "1. Call `list_accounts` to get every account.\n"
                   "2. Call `compute_health_score` for each account.\n"
                   "3. Rank the accounts from the lowest score to the highest and name the label of each.",
    },
    {
        "name": "email-etiquette", "type": "tool_guide", "priority": 50, "target_tools": ["send_email"],
        "description": "House style for outgoing mail.",
        "content": "Write in a friendly, professional tone, keep it under 150 words, never include internal "
                   "scores or ticket ids, and sign as 'Customer Success'.",
    },
    {
        "name": "side-effects-need-secops", "type": "tool_approval", "priority": 10,
        "description": "Emails and deletions leave the building; SecOps reviews each one.",
        "target_tools": ["send_email", "delete_account"], "approver_role": "secops",
        "approval_ttl_seconds": 72 * 3600,
    },
    {
        "name": "executive-summary", "type": "output_formatter", "priority": 50, "enabled": False,
        "description": "Frame every answer as an executive summary.",
        "content": "Executive summary\n\n{answer}\n\nPrepared by the CRM assistant.",
    },
]


def _users(roles: dict[str, Group], password: str) -> list[str]:
    User = get_user_model()
    created = []
    for username, role_names in DEMO_USERS.items():
        user, made = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        if made:
            user.set_password(password)
            if username == "admin":
                user.is_staff = user.is_superuser = True
            elif username in ("approver", "compliance"):
                user.is_staff = True  # they work in the admin's queues
            user.save()
            created.append(username)
        user.groups.add(*(roles[r] for r in role_names))
    return created


@transaction.atomic
def demo_load(*, skills_dir: Path | None = None) -> dict:
    load_crm()
    tools = []
    for definition in TOOL_DEFINITIONS:
        tool, _ = Tool.objects.update_or_create(name=definition["name"], defaults={
            k: definition[k] for k in ("description", "input_schema", "side_effect", "handler")})
        if definition["name"] in TRUSTED_OUTPUT and not TrustChange.objects.filter(
                kind=TrustChange.Kind.TRUST, subject=TrustChange.Subject.TOOL, name=definition["name"]).exists():
            # The demo's deliberate marks (agents.demo_data says why), recorded like an admin's;
            # set once, so a reload never undoes a governance admin's later change.
            tool = tool_trust(tool=tool, trusted=True, user=None, platform=True,
                              reason=f"demo: {TRUSTED_OUTPUT[definition['name']]}")
        tools.append(tool)
    roles_ensure()
    roles = {name: Group.objects.get_or_create(name=name)[0] for names in DEMO_USERS.values() for name in names}
    users = _users(roles, os.environ.get("DEMO_PASSWORD") or "warrant-demo")
    for tool in tools:
        ToolGrant.objects.get_or_create(role=roles["operators"], tool=tool)
    # scripted, or the model server WARRANT_MODEL_URL and WARRANT_MODEL_NAME name (agents.demo_model).
    profile = demo_model.demo_profile()
    agent, _ = Agent.objects.get_or_create(slug="crm-assistant", defaults={
        "name": "CRM assistant", "description": "Answers questions about customer accounts.",
        "instructions": INSTRUCTIONS, "model_profile": profile})
    demo_model.point(agent, profile)
    agent.tools.add(*tools)
    version, published = agent_publish(agent=agent)
    policies = policies_ensure(POLICIES)
    root = skills_dir or Path(__file__).resolve().parent.parent / "skills" / "library"
    # The bundled library is reviewed with the code, but a person runs load_demo, on a database whose
    # golden sets may hold more than the demo's: what it would put in force passes the gate first.
    imported = [skill_import_report(text=path.read_text(encoding="utf-8"), status=Skill.Status.ACTIVE, gated=True)
                for path in sorted(root.glob("*/SKILL.md"))]
    skills = [skill.name for skill, _ in imported]
    held = [skill.name for skill, outcome in imported if outcome == HELD]
    # The demo's golden set. evals sits above runs (its cases run through the harness), so it is
    # imported here, when the demo loads, and not with this module.
    from evals.demo import golden_load

    golden = golden_load()
    return {"users_created": users, "policies_created": policies, "agent_version": version.version,
            "agent_published": published, "skills": skills, "skills_held": held,
            "model": demo_model.describe(agent.model_profile), "golden_cases": golden}
