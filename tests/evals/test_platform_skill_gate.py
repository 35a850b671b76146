"""load_demo is run by a person, on a database whose golden sets may hold more than the demo's: what
its skill import would put in force passes the same activation gate as a person's activation."""

import shutil
from pathlib import Path

import pytest

from evals.models import EvalRun
from runs.demo import demo_load
from skills.models import Skill, SkillVersion
from tests.governance.test_drafts_skills import NARROW  # allows no CRM tool: list-accounts breaks

pytestmark = pytest.mark.django_db

LIBRARY = Path(__file__).resolve().parents[2] / "skills" / "library"


@pytest.fixture
def library(tmp_path):
    shutil.copytree(LIBRARY, tmp_path / "library")
    return tmp_path / "library"


def _rewrite(library: Path, name: str, old: str, new: str) -> None:
    path = library / name / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_an_unchanged_library_runs_no_gate(demo, library):
    runs = EvalRun.objects.count()
    assert demo_load(skills_dir=library)["skills_held"] == []
    assert EvalRun.objects.count() == runs


def test_new_library_text_that_breaks_a_case_is_held_and_what_was_in_force_stays(demo, library):
    before = Skill.objects.get(name="account-health-review")
    # Without list_open_tickets, the health review cannot read Acme's tickets: acme-health breaks.
    _rewrite(library, "account-health-review", "  - list_open_tickets\n", "")
    result = demo_load(skills_dir=library)
    assert result["skills_held"] == ["account-health-review"]
    after = Skill.objects.get(name="account-health-review")
    assert (after.status, after.version, after.sha256) == ("active", before.version, before.sha256)
    gate = EvalRun.objects.filter(purpose="gate").latest("created_at")
    assert gate.status == "failed" and "acme-health" in gate.report["broken"]


def test_new_library_text_that_passes_goes_in_force_with_its_gate(demo, library):
    before = Skill.objects.get(name="account-health-review")
    _rewrite(library, "account-health-review", "  owner: customer-success", "  owner: customer-success-emea")
    assert demo_load(skills_dir=library)["skills_held"] == []
    after = Skill.objects.get(name="account-health-review")
    assert (after.status, after.version) == ("active", before.version + 1)
    version = SkillVersion.objects.filter(skill_name=after.name).order_by("-id").first()
    assert version.eval_run_id and EvalRun.objects.get(id=version.eval_run_id).status == "passed"


def test_a_new_bundled_skill_that_breaks_a_case_is_a_draft_for_people_to_review(demo, library):
    (library / "accounts-without-tools").mkdir()
    (library / "accounts-without-tools" / "SKILL.md").write_text(NARROW, encoding="utf-8")
    assert demo_load(skills_dir=library)["skills_held"] == ["accounts-without-tools"]
    assert Skill.objects.get(name="accounts-without-tools").status == "draft"


def test_a_skill_a_person_retired_goes_back_in_force_only_through_the_gate(demo, library):
    Skill.objects.filter(name="account-health-review").update(status="retired")
    gates = EvalRun.objects.filter(purpose="gate").count()
    assert demo_load(skills_dir=library)["skills_held"] == []
    assert Skill.objects.get(name="account-health-review").status == "active"
    assert EvalRun.objects.filter(purpose="gate", status="passed").count() == gates + 1
