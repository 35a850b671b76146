"""`manage.py import_skills` and the removal gate.

The command is the platform and puts nothing in force, but new text for an active skill takes the
version in force out of force at once (one row per skill, the new text a draft), lifting its contract.
It passes the same gate as a person's change (the golden sets on the world without the version); a
failing set leaves the skill as it was and fails the command naming the broken cases, unless
--emergency-reason takes it past in one step, marked on the history row with who ran the command.
"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals.models import EvalRun
from skills.models import Skill, SkillVersion
from skills.services import skill_import
from tests.skills.texts import HARMLESS, NARROW, in_force, narrow_in_force

pytestmark = pytest.mark.django_db

NEW_TEXT = NARROW.replace("Answer from what you know", "Answer only from what you know")
REASON = "The account list is read live again from today; ticket OPS-9 accepts the risk"


@pytest.fixture
def constraining(demo) -> Skill:
    return narrow_in_force()


def _file(tmp_path, text: str):
    path = tmp_path / "accounts-without-tools" / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _command(*args) -> str:
    out = StringIO()
    call_command("import_skills", *map(str, args), stdout=out, stderr=StringIO())
    return out.getvalue()


def _versions() -> list[SkillVersion]:
    return list(SkillVersion.objects.filter(skill_name="accounts-without-tools").order_by("id"))


def test_new_text_for_an_active_skill_the_set_needs_is_refused_naming_the_cases(constraining, tmp_path):
    versions = _versions()
    with pytest.raises(CommandError) as refused:
        _command(_file(tmp_path, NEW_TEXT))
    message = str(refused.value)
    assert "1 SKILL.md file(s) not imported" in message and "accounts-not-read" in message
    assert "'accounts-without-tools' v1, which is active" in message and "--emergency-reason" in message
    gate = EvalRun.objects.order_by("-created_at").first()
    assert (gate.status, gate.subject) == ("failed", "skill accounts-without-tools v1: take out of force")
    assert str(gate.id) in message
    skill = Skill.objects.get(pk=constraining.pk)
    assert (skill.status, skill.version, skill.sha256, skill.source) == ("active", 1, constraining.sha256, NARROW)
    assert _versions() == versions  # nothing written
    assert "accounts-without-tools" in in_force()


def test_the_other_files_still_import_beside_a_refused_one(constraining, tmp_path):
    other = tmp_path / "other" / "SKILL.md"
    other.parent.mkdir()
    other.write_text(HARMLESS.replace("name: accounts-without-tools", "name: board-pack"), encoding="utf-8")
    with pytest.raises(CommandError, match="1 SKILL.md file"):
        _command(_file(tmp_path, NEW_TEXT), other)
    assert Skill.objects.get(name="board-pack").status == "draft"
    assert Skill.objects.get(pk=constraining.pk).status == "active"


def test_an_emergency_reason_takes_it_out_of_force_in_one_step_marked_on_its_history(constraining, tmp_path):
    out = _command(_file(tmp_path, NEW_TEXT), "--emergency-reason", REASON)
    assert "updated   accounts-without-tools v2" in out and REASON in out
    skill = Skill.objects.get(pk=constraining.pk)
    assert (skill.status, skill.version, skill.source, skill.author) == ("draft", 2, NEW_TEXT, None)
    assert "accounts-without-tools" not in in_force()
    version = _versions()[-1]
    assert (version.version, version.status, version.changed_by, version.emergency_requested_by) == (
        2, "draft", None, None)
    assert version.emergency_reason.startswith(f"{REASON} (manage.py import_skills, OS user ")
    assert EvalRun.objects.get(id=version.eval_run_id).status == "failed"  # what the gate would have refused


def test_a_reason_too_short_to_say_why_is_refused_before_anything_runs(constraining, tmp_path):
    runs = EvalRun.objects.count()
    with pytest.raises(CommandError, match="at least 10 characters"):
        _command(_file(tmp_path, NEW_TEXT), "--emergency-reason", "because")
    assert EvalRun.objects.count() == runs and Skill.objects.get(pk=constraining.pk).status == "active"


def test_new_text_for_an_active_skill_the_set_does_not_need_passes_with_its_gate_on_the_history(demo, tmp_path):
    skill, _ = skill_import(text=HARMLESS, status=Skill.Status.ACTIVE)
    out = _command(_file(tmp_path, HARMLESS.replace("memory only", "memory alone")))
    assert "updated   accounts-without-tools v2" in out
    assert Skill.objects.get(pk=skill.pk).status == "draft"
    version = _versions()[-1]
    gate = EvalRun.objects.get(id=version.eval_run_id)
    assert (gate.status, gate.subject, version.emergency_reason) == (
        "passed", "skill accounts-without-tools v1: take out of force", "")


def test_what_takes_nothing_out_of_force_runs_no_gate(constraining, tmp_path):
    runs = EvalRun.objects.count()
    assert "unchanged accounts-without-tools v1" in _command(_file(tmp_path, NARROW))
    Skill.objects.filter(pk=constraining.pk).update(status=Skill.Status.RETIRED)
    assert "updated   accounts-without-tools v2" in _command(_file(tmp_path, NEW_TEXT))
    assert EvalRun.objects.count() == runs


def test_a_skill_activated_after_the_import_looked_is_not_taken_out_of_force_ungated(constraining):
    """The command reads the skill without a lock to decide whether new text needs the removal gate; a
    person may activate it before the write. The write checks again under the row's lock (the race
    itself cannot be timed from a test: this is the check the write makes, with what the read saw)."""
    from skills.parser import parse_skill_md
    from skills.services import SkillChanged, _written

    assert constraining.status == Skill.Status.ACTIVE
    versions = SkillVersion.objects.count()
    with pytest.raises(SkillChanged, match="activated while it was imported"):
        _written(parsed=parse_skill_md(NEW_TEXT), text=NEW_TEXT, user=None, status=None, none_in_force=True)
    constraining.refresh_from_db()
    assert constraining.status == Skill.Status.ACTIVE and constraining.sha256 != parse_skill_md(NEW_TEXT).sha256
    assert SkillVersion.objects.count() == versions
