"""The removal gate on the demo's own skills: the golden set run on the world without the skill.

account-health-review's body is what makes the demo agent call the four tools acme-health expects,
so one admin cannot retire it; churn-risk-playbook and incident-summary change a case's answer but
break none, so one admin retires them, with the gate's eval run on the history row.
"""

import pytest

from evals import gating
from evals.models import EvalRun
from skills.models import Skill, SkillVersion

pytestmark = pytest.mark.django_db


def test_the_removal_gate_runs_each_case_with_the_skill_and_without_it(demo):
    verdict = gating.gate_skill(spec=Skill.objects.get(name="account-health-review").spec(), removal=True)
    assert not verdict.passed and verdict.report["broken"] == ["acme-health"]
    row = next(r for r in verdict.report["cases"] if r["name"] == "acme-health")
    assert row["before"]["passed"] and "compute_health_score" in row["before"]["tools_called"]
    assert verdict.report["subject"] == "skill account-health-review v1: take out of force"
    # Nothing was changed in force by asking.
    assert Skill.objects.get(name="account-health-review").status == "active"


def test_one_admin_retires_a_demo_skill_the_set_does_not_need_and_not_one_it_does(admin):
    refused = admin.delete("/api/v1/skills/account-health-review/")
    assert refused.status_code == 409 and refused.json()["error"]["details"]["report"]["broken"] == ["acme-health"]
    assert Skill.objects.get(name="account-health-review").status == "active"
    assert admin.delete("/api/v1/skills/incident-summary/").status_code == 204
    version = SkillVersion.objects.filter(skill_name="incident-summary").order_by("-id").first()
    assert (version.status, version.changed_by.username, version.emergency_reason) == ("retired", "admin", "")
    assert EvalRun.objects.get(id=version.eval_run_id).status == "passed"
