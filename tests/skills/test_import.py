from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from skills.models import Skill
from skills.parser import SkillFormatError
from skills.services import skill_export, skill_import, skill_import_report

pytestmark = pytest.mark.django_db

LIBRARY = Path(__file__).resolve().parents[2] / "skills" / "library"

TEXT = """---
name: tiny-skill
description: A small skill for tests.
tags: [tiny]
allowed-tools: [calculator]
---

1. Call `calculator`.
"""


@pytest.fixture(autouse=True)
def _no_skills_yet():
    # The session's demo already imported the library; these tests start from an empty table.
    Skill.objects.all().delete()


def run_command(*args):
    out = StringIO()
    call_command("import_skills", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def write_skill(root: Path, name: str, text: str) -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_it_creates_a_skill_from_its_text(django_user_model):
    user = django_user_model.objects.create_user("gov")
    skill, created = skill_import(text=TEXT, user=user)
    assert created
    skill.refresh_from_db()
    assert (skill.name, skill.version, skill.status) == ("tiny-skill", 1, Skill.Status.DRAFT)
    assert skill.tags == ["tiny"]
    assert skill.allowed_tools == ["calculator"]
    assert skill.body == "1. Call `calculator`."
    assert skill.source == TEXT
    assert skill.updated_by == user
    assert skill_export(skill=skill) == TEXT


def test_importing_the_same_text_again_changes_nothing():
    first, _ = skill_import(text=TEXT)
    second, outcome = skill_import_report(text=TEXT)
    again, created = skill_import(text=TEXT)
    assert outcome == "unchanged" and not created
    assert second.pk == again.pk == first.pk
    fresh = Skill.objects.get(pk=first.pk)
    assert fresh.version == 1
    assert fresh.updated_at == first.updated_at


def test_changed_text_bumps_the_version_by_one():
    skill_import(text=TEXT)
    changed = TEXT.replace("A small skill", "A smaller skill")
    skill, outcome = skill_import_report(text=changed)
    assert outcome == "updated"
    skill.refresh_from_db()
    assert skill.version == 2
    assert skill.description == "A smaller skill for tests."
    assert skill_export(skill=skill) == changed
    assert Skill.objects.count() == 1


def test_a_higher_front_matter_version_wins_over_the_bump():
    skill_import(text=TEXT)
    skill, _ = skill_import(text=TEXT.replace("tags:", "version: 7\ntags:"))
    assert skill.version == 7
    skill, _ = skill_import(text=TEXT.replace("tags:", "version: 3\ntags:"))
    assert skill.version == 8


def test_a_new_skill_starts_at_its_front_matter_version():
    skill, _ = skill_import(text=TEXT.replace("tags:", "version: 4\ntags:"))
    assert skill.version == 4


def test_status_is_set_on_create_and_kept_when_not_given():
    skill, _ = skill_import(text=TEXT, status=Skill.Status.DRAFT)
    assert skill.status == Skill.Status.DRAFT
    skill, _ = skill_import(text=TEXT.replace("tiny]", "tiny, small]"))
    assert skill.status == Skill.Status.DRAFT
    skill, outcome = skill_import_report(text=TEXT.replace("tiny]", "tiny, small]"), status=Skill.Status.APPROVED)
    assert outcome == "updated"
    assert (skill.status, skill.version) == (Skill.Status.APPROVED, 2)


def test_an_unknown_status_is_refused():
    with pytest.raises(SkillFormatError, match="unknown skill status"):
        skill_import(text=TEXT, status="published")
    assert not Skill.objects.exists()


def test_a_malformed_skill_raises_and_writes_nothing():
    with pytest.raises(SkillFormatError, match="'description' is required"):
        skill_import(text="---\nname: broken\n---\nbody\n")
    assert not Skill.objects.exists()


def test_a_malformed_update_leaves_the_stored_skill_alone():
    skill_import(text=TEXT)
    with pytest.raises(SkillFormatError):
        skill_import(text=TEXT.replace("tags: [tiny]", "tags: tiny"))
    skill = Skill.objects.get(name="tiny-skill")
    assert (skill.version, skill.source) == (1, TEXT)


def test_the_command_imports_the_library_by_default():
    output = run_command()
    assert set(Skill.objects.values_list("name", flat=True)) == {
        "account-health-review", "incident-summary", "churn-risk-playbook",
    }
    assert output.count("created") == 3
    for path in LIBRARY.glob("*/SKILL.md"):
        skill = Skill.objects.get(name=path.parent.name)
        assert skill.version == 1
        assert skill_export(skill=skill) == path.read_text(encoding="utf-8")


def test_running_the_command_again_reports_every_skill_unchanged():
    run_command(str(LIBRARY))
    before = list(Skill.objects.values_list("name", "version", "updated_at"))
    output = run_command(str(LIBRARY))
    assert output.count("unchanged") == 3
    assert "created" not in output and "updated" not in output
    assert list(Skill.objects.values_list("name", "version", "updated_at")) == before


def test_the_command_reports_an_updated_file(tmp_path):
    path = write_skill(tmp_path, "tiny-skill", TEXT)
    run_command(str(tmp_path))
    path.write_text(TEXT + "2. Report the result.\n", encoding="utf-8")
    output = run_command(str(path))
    assert "updated" in output and "tiny-skill v2" in output


def test_the_command_refuses_a_malformed_file_but_imports_the_others(tmp_path):
    write_skill(tmp_path, "tiny-skill", TEXT)
    bad = write_skill(tmp_path, "bad-skill", "name: bad-skill\ndescription: no fences\n")
    with pytest.raises(CommandError) as excinfo:
        run_command(str(tmp_path))
    message = str(excinfo.value)
    assert str(bad) in message
    assert "must start with a '---' front matter block" in message
    assert list(Skill.objects.values_list("name", flat=True)) == ["tiny-skill"]


def test_the_command_refuses_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(TEXT.replace("small", "sm\xe4ll").encode("latin-1"))
    with pytest.raises(CommandError, match="UTF-8"):
        run_command(str(tmp_path))
    assert not Skill.objects.exists()


def test_the_command_refuses_a_missing_path_or_an_empty_directory(tmp_path):
    with pytest.raises(CommandError, match="no such file or directory"):
        run_command(str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="no SKILL.md files found"):
        run_command(str(tmp_path))
