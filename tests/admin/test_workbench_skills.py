"""The workbench's skills: a SKILL.md upload validated, kept in history with a diff, never overwriting
a skill of the same name."""

import io

import pytest

from skills.models import Skill, SkillVersion
from tests.admin.workbench import browser_as

pytestmark = pytest.mark.django_db  # starts no run: the test's transaction is enough


def test_a_skill_md_upload_is_validated_and_kept_in_history_with_a_diff(demo):
    client = browser_as("admin")
    skill = Skill.objects.get(name="incident-summary")
    url = f"/admin/skills/skill/{skill.pk}/change/"
    bad = io.BytesIO(b"no front matter")
    bad.name = "SKILL.md"
    response = client.post(url, {"source": skill.source, "status": "active", "upload": bad})
    assert response.status_code == 200 and "front matter" in response.content.decode()
    good = io.BytesIO((skill.source + "\nAlways name the ticket owner.\n").encode())
    good.name = "SKILL.md"
    # New text is a draft by its author, who may not approve it: said next to the field, nothing saved.
    refused = client.post(url, {"source": "", "status": "approved", "upload": good})
    assert refused.status_code == 200 and "author may not approve" in refused.content.decode()
    assert Skill.objects.get(pk=skill.pk).version == 1
    good.seek(0)
    assert client.post(url, {"source": "", "status": "draft", "upload": good}).status_code == 302
    skill.refresh_from_db()
    assert (skill.version, skill.status) == (2, "draft") and SkillVersion.objects.filter(skill=skill).count() == 2
    page = client.get(f"/admin/skills/skill/{skill.pk}/versions/").content.decode()
    assert "+ added" in page and "Always name the ticket owner." in page



def test_a_new_skill_is_added_by_uploading_its_skill_md(demo):
    client = browser_as("admin")
    text = ("---\nname: renewal-check\ndescription: Check an account's renewal date and owner.\n"
            "allowed-tools:\n  - get_account\n---\n\n# Renewal check\n\n1. Call `get_account`.\n")
    upload = io.BytesIO(text.encode())
    upload.name = "SKILL.md"
    response = client.post("/admin/skills/skill/add/", {"source": "", "status": "draft", "upload": upload})
    assert response.status_code == 302, response.content.decode()[:2000]
    skill = Skill.objects.get(name="renewal-check")
    assert (skill.status, skill.allowed_tools, skill.updated_by.username) == ("draft", ["get_account"], "admin")
    assert SkillVersion.objects.filter(skill=skill).count() == 1


def test_adding_a_skill_never_overwrites_one_of_the_same_name(demo):
    skill = Skill.objects.get(name="incident-summary")
    response = browser_as("admin").post("/admin/skills/skill/add/", {"source": skill.source + "\nchanged\n", "status": "draft"})
    assert response.status_code == 200 and "exists already" in response.content.decode()
    after = Skill.objects.get(pk=skill.pk)
    assert (after.version, after.sha256, after.status) == (skill.version, skill.sha256, skill.status)
