"""A skill's activation through the gate: every agent's golden set with the skill active; a failing
set is refused with the report, the emergency path records its reason on the version and marks the
receipts of the runs that use it; the CLI then fails the set in force (exit 1)."""

import json

import pytest
from django.contrib.auth.models import User

from evals.models import EvalRun
from runs import services as run_services
from runs.models import Receipt
from skills.models import Skill, SkillVersion
from skills.services import skill_import
from tests.evals.cli import run_evals_cli

pytestmark = pytest.mark.django_db

REASON = "The account list must be audited from today; ticket SEC-7 accepts the slower answer"
# Matched by "List all accounts." (its tags), and allowing no tool: the list-accounts case, which
# must call list_accounts, would have every call refused.
NARROW = """---
name: accounts-without-tools
description: Answer questions about the list of accounts from memory only.
version: 1
tags: [accounts, all accounts]
allowed-tools: [calculator]
---

Answer from what you know; do not look anything up.
"""


def approved_skill() -> Skill:
    skill, _ = skill_import(text=NARROW, status=Skill.Status.APPROVED)  # the platform's import: reviewed
    return skill


def test_a_skill_that_breaks_a_case_is_not_activated_and_says_which(admin):
    approved_skill()
    answer = admin.patch("/api/v1/skills/accounts-without-tools/", {"status": "active"}, format="json")
    assert answer.status_code == 409, answer.json()
    error = answer.json()["error"]
    assert error["code"] == "gate_failed"
    report = error["details"]["report"]
    assert "list-accounts" in report["broken"] and report["total"] == 20
    row = next(r for r in report["cases"] if r["name"] == "list-accounts")
    assert row["before"]["tools_called"] == ["list_accounts"] and row["after"]["tools_called"] == []
    assert Skill.objects.get(name="accounts-without-tools").status == "approved"
    assert EvalRun.objects.get(id=error["details"]["eval_run"]).purpose == "gate"


def test_a_skill_that_passes_is_activated_with_its_gate_in_the_history(admin):
    skill = approved_skill()
    harmless = NARROW.replace("tags: [accounts, all accounts]", "tags: [quarterly board pack]")
    skill_import(text=harmless, status=Skill.Status.APPROVED)
    answer = admin.patch(f"/api/v1/skills/{skill.name}/", {"status": "active"}, format="json")
    assert answer.status_code == 200, answer.json()
    version = SkillVersion.objects.filter(skill_name=skill.name).order_by("-id").first()
    assert version.status == "active" and version.emergency_reason == ""
    assert EvalRun.objects.get(id=version.eval_run_id).status == "passed"


def test_the_emergency_path_activates_a_skill_records_why_and_marks_receipts(admin, capsys):
    skill = approved_skill()
    answer = admin.patch(f"/api/v1/skills/{skill.name}/", {"status": "active", "emergency_reason": REASON},
                         format="json")
    assert answer.status_code == 200, answer.json()
    skill.refresh_from_db()
    assert (skill.status, skill.emergency_reason) == ("active", REASON)
    version = SkillVersion.objects.filter(skill_name=skill.name).order_by("-id").first()
    assert version.emergency_reason == REASON and EvalRun.objects.get(id=version.eval_run_id).status == "failed"
    run, _ = run_services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                    caller=User.objects.get(username="operator"))
    run_services.run_advance(run_id=run.id)
    sealed = json.loads(Receipt.objects.get(run=run).body)
    assert {"skill": skill.name, "version": skill.version, "reason": REASON} in sealed["emergency"]
    # What CI runs on the set in force: the case the emergency broke fails it.
    capsys.readouterr()
    assert run_evals_cli("--agent", "crm-assistant") == 1
    assert "FAIL  crm-assistant/list-accounts" in capsys.readouterr().out
