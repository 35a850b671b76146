"""A skill's activation through the gate: every agent's golden set with the skill active; a failing
set is refused with the report; the emergency path takes two governance admins (one asks with a
reason, another, neither the one who asked nor the text's author, confirms), records both on the
version and marks the receipts of the runs that use it; the CLI then fails the set in force (exit 1)."""

import json

import pytest
from django.contrib.auth.models import User

from evals.models import EvalRun
from runs import services as run_services
from runs.models import Receipt
from skills.models import Skill, SkillVersion
from skills.services import skill_import
from tests.evals.cli import run_evals_cli
from tests.skills.texts import NARROW

pytestmark = pytest.mark.django_db

REASON = "The account list must be audited from today; ticket SEC-7 accepts the slower answer"


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


def activate(client, skill: Skill, **body):
    return client.patch(f"/api/v1/skills/{skill.name}/", {"status": "active", **body}, format="json")


def test_the_emergency_path_takes_a_second_admin_records_both_and_marks_receipts(admin, governance_admin, capsys):
    skill = approved_skill()
    asked = activate(admin, skill, emergency_reason=REASON)
    assert asked.status_code == 202, asked.json()
    request = asked.json()["emergency_request"]
    assert (asked.json()["status"], request["reason"], request["requested_by"]) == ("approved", REASON, "admin")
    refused = activate(admin, skill, confirm_emergency=True)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "second_admin_required"
    assert Skill.objects.get(pk=skill.pk).status == "approved"  # neither asking nor the refusal put it in force
    done = activate(governance_admin.api, skill, confirm_emergency=True)
    assert done.status_code == 200, done.json()
    assert done.json()["emergency_request"] is None
    skill.refresh_from_db()
    mark = f"{REASON} (asked by admin, confirmed by {governance_admin.user.username})"
    assert (skill.status, skill.emergency_reason) == ("active", mark)
    version = SkillVersion.objects.filter(skill_name=skill.name).order_by("-id").first()
    assert (version.emergency_reason, version.changed_by, version.emergency_requested_by.username) == (
        mark, governance_admin.user, "admin")
    assert EvalRun.objects.get(id=version.eval_run_id).status == "failed"
    run, _ = run_services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                                    caller=User.objects.get(username="operator"))
    run_services.run_advance(run_id=run.id)
    sealed = json.loads(Receipt.objects.get(run=run).body)
    assert {"skill": skill.name, "version": skill.version, "reason": mark} in sealed["emergency"]
    # What CI runs on the set in force: the case the emergency broke fails it.
    capsys.readouterr()
    assert run_evals_cli("--agent", "crm-assistant") == 1
    assert "FAIL  crm-assistant/list-accounts" in capsys.readouterr().out


def test_the_author_of_the_text_may_not_confirm_its_emergency(admin, governance_admin):
    skill, _ = skill_import(text=NARROW.replace("version: 1", "version: 2"), user=governance_admin.user)
    skill_import(text=skill.source, user=User.objects.get(username="admin"), status=Skill.Status.APPROVED)
    assert activate(admin, skill, emergency_reason=REASON).status_code == 202
    refused = activate(governance_admin.api, skill, confirm_emergency=True)
    assert refused.status_code == 403, refused.json()
    error = refused.json()["error"]
    assert error["code"] == "second_admin_required"
    assert (error["details"]["emergency_requested_by"], error["details"]["author"]) == (
        "admin", governance_admin.user.username)
    assert Skill.objects.get(pk=skill.pk).status == "approved"


def test_a_request_is_bound_to_its_text_pending_once_and_expires(admin, governance_admin, settings):
    skill = approved_skill()
    assert activate(admin, skill, emergency_reason=REASON).status_code == 202
    again = activate(governance_admin.api, skill, emergency_reason="another reason, stated at length")
    assert again.status_code == 409 and again.json()["error"]["code"] == "emergency_pending"
    assert Skill.objects.get(pk=skill.pk).emergency_request_reason == REASON
    settings.WARRANT = {**settings.WARRANT, "SECOND_ADMIN_WINDOW_HOURS": 0}
    late = activate(governance_admin.api, skill, confirm_emergency=True)
    assert late.status_code == 409 and late.json()["error"]["code"] == "request_expired"
    settings.WARRANT = {**settings.WARRANT, "SECOND_ADMIN_WINDOW_HOURS": 24}
    # New text voids the request: what the second admin would confirm is not what was asked about.
    changed = NARROW.replace("Answer from what you know", "Answer only from what you know")
    assert admin.patch(f"/api/v1/skills/{skill.name}/", {"source": changed}, format="json").status_code == 200
    skill_import(text=changed, status=Skill.Status.APPROVED)
    none = activate(governance_admin.api, skill, confirm_emergency=True)
    assert none.status_code == 409 and none.json()["error"]["code"] == "no_emergency_request"
    assert Skill.objects.get(pk=skill.pk).status == "approved"
