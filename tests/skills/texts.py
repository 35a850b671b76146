"""Skill texts more than one test module puts in force, and the world those modules put them in."""

# Matched by "List all accounts." (its tags), allowing only the calculator: while it is active, a
# run's list_accounts call is refused, so the golden set's list-accounts case fails with it.
NARROW = """---
name: accounts-without-tools
description: Answer questions about the list of accounts from memory only.
version: 1
tags: [accounts, all accounts]
allowed-tools: [calculator]
---

Answer from what you know; do not look anything up.
"""

# The same skill with its tags changed: nothing in the golden set depends on the change.
HARMLESS = NARROW.replace("tags: [accounts, all accounts]", "tags: [quarterly board pack]")


def in_force() -> list[str]:
    """The names of the skills a run of crm-assistant would have in force now."""
    from runs import freeze

    _, snapshot = freeze.governance_for_roles(agent_slug="crm-assistant", username="t", roles=[])
    return sorted(s["name"] for s in snapshot["skills"])


def narrow_in_force():
    """NARROW in force (the platform's one-step import), with the golden set saying its contract
    holds: the demo's list-accounts case (which needs list_accounts to run) off, and a case that the
    list is not read while the skill is active. The skill."""
    from evals.models import GoldenCase
    from skills.models import Skill
    from skills.services import skill_import

    skill, _ = skill_import(text=NARROW, status=Skill.Status.ACTIVE)
    GoldenCase.objects.filter(name="list-accounts").update(enabled=False)
    GoldenCase.objects.create(agent=GoldenCase.objects.get(name="acme-health").agent, name="accounts-not-read",
                              input="List all accounts.", roles=["operators"], expected_status="succeeded",
                              tools_not_called=["list_accounts"])
    return skill
