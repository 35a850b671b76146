"""Skills over the API: import from SKILL.md text, replace (version bump), retire; strict input."""

import pytest

from skills.models import Skill

pytestmark = pytest.mark.django_db

TEXT = """---
name: tiny-skill
description: A small skill for tests.
tags: [tiny, Math]
allowed-tools: [calculator]
---

1. Call `calculator`.
"""


def create(client, **body):
    return client.post("/api/v1/skills/", {"source": TEXT, **body}, format="json")


def test_anyone_with_a_role_lists_the_skills(operator):
    body = operator.get("/api/v1/skills/").json()
    assert body["count"] == 3
    assert [s["name"] for s in body["results"]] == ["account-health-review", "churn-risk-playbook", "incident-summary"]
    assert "body" not in body["results"][0]


def test_the_list_filters_by_status_and_tag(admin):
    create(admin, status="draft")
    assert [s["name"] for s in admin.get("/api/v1/skills/?status=draft").json()["results"]] == ["tiny-skill"]
    assert admin.get("/api/v1/skills/?status=active").json()["count"] == 3
    assert [s["name"] for s in admin.get("/api/v1/skills/?tag=churn").json()["results"]] == ["churn-risk-playbook"]
    assert [s["name"] for s in admin.get("/api/v1/skills/?tag=math").json()["results"]] == ["tiny-skill"]
    assert admin.get("/api/v1/skills/?tag=nothing").json()["count"] == 0


def test_someone_without_a_role_reads_no_skills(outsider):
    assert outsider.get("/api/v1/skills/").status_code == 403
    assert outsider.get("/api/v1/skills/churn-risk-playbook/").status_code == 403


def test_it_reads_one_skill_with_its_body(compliance):
    response = compliance.get("/api/v1/skills/churn-risk-playbook/")
    assert response.status_code == 200
    skill = response.json()
    assert skill["version"] == 1 and skill["status"] == "active"
    assert "compute_health_score" in skill["allowed_tools"]
    assert "churn" in skill["tags"]
    assert skill["body"].startswith("# Churn-risk playbook")
    assert len(skill["sha256"]) == 64


def test_an_unknown_skill_is_a_404(admin):
    for response in (admin.get("/api/v1/skills/nope/"), admin.patch("/api/v1/skills/nope/", {}, format="json"),
                     admin.delete("/api/v1/skills/nope/")):
        assert response.status_code == 404


def test_an_admin_creates_a_skill_from_its_skill_md(admin):
    response = create(admin)
    assert response.status_code == 201, response.json()
    skill = response.json()
    assert (skill["name"], skill["version"], skill["status"]) == ("tiny-skill", 1, "draft")
    assert skill["tags"] == ["tiny", "Math"] and skill["allowed_tools"] == ["calculator"]
    assert skill["body"] == "1. Call `calculator`."
    assert skill["source"] == TEXT and skill["updated_by"] == "admin"
    assert Skill.objects.get(name="tiny-skill").sha256 == skill["sha256"]


def test_a_skill_can_be_created_as_a_draft(admin):
    assert create(admin, status="draft").json()["status"] == "draft"


def test_creating_a_skill_that_exists_is_a_conflict(admin):
    create(admin)
    response = create(admin)
    assert response.status_code == 409
    assert Skill.objects.get(name="tiny-skill").version == 1


@pytest.mark.parametrize("source, message", [
    ("no front matter here", "must start with a '---' front matter block"),
    ("---\nname: tiny-skill\n---\n\nbody\n", "'description' is required"),
    ("---\nname: Tiny Skill\ndescription: d\n---\n\nbody\n", "'name' must be lowercase"),
    ("---\nname: tiny-skill\ndescription: d\n---\n", "has no body"),
])
def test_a_malformed_skill_md_is_a_400_with_the_parsers_message(admin, source, message):
    response = admin.post("/api/v1/skills/", {"source": source}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert message in error["details"]["source"][0]
    assert not Skill.objects.filter(name="tiny-skill").exists()


@pytest.mark.parametrize("extra, message", [
    ({"version": 9}, "This field is read-only."),
    ({"sha256": "0" * 64}, "This field is read-only."),
    ({"body": "do something else"}, "This field is read-only."),
    ({"owner": "me"}, "Unknown field."),
])
def test_it_refuses_read_only_and_unknown_fields(admin, extra, message):
    response = create(admin, **extra)
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {next(iter(extra)): [message]}
    create(admin)
    response = admin.patch("/api/v1/skills/tiny-skill/", extra, format="json")
    assert response.status_code == 400
    assert Skill.objects.get(name="tiny-skill").version == 1


def test_patching_the_source_bumps_the_version(admin):
    create(admin)
    changed = TEXT.replace("A small skill", "A smaller skill")
    response = admin.patch("/api/v1/skills/tiny-skill/", {"source": changed}, format="json")
    assert response.status_code == 200, response.json()
    skill = response.json()
    assert (skill["version"], skill["description"], skill["source"]) == (2, "A smaller skill for tests.", changed)
    same = admin.patch("/api/v1/skills/tiny-skill/", {"source": changed}, format="json").json()
    assert same["version"] == 2


def test_patching_the_status_alone_keeps_the_version(admin):
    create(admin)
    skill = admin.patch("/api/v1/skills/tiny-skill/", {"status": "draft"}, format="json").json()
    assert (skill["status"], skill["version"]) == ("draft", 1)


def test_a_patch_naming_another_skill_is_a_400(admin):
    create(admin)
    response = admin.patch("/api/v1/skills/tiny-skill/", {"source": TEXT.replace("tiny-skill", "other-skill")},
                           format="json")
    assert response.status_code == 400
    assert "other-skill" in response.json()["error"]["details"]["source"][0]
    assert not Skill.objects.filter(name="other-skill").exists()


def test_a_malformed_patch_is_a_400_and_changes_nothing(admin):
    create(admin)
    response = admin.patch("/api/v1/skills/tiny-skill/", {"source": "---\nname: tiny-skill\n"}, format="json")
    assert response.status_code == 400
    assert "front matter is not closed" in response.json()["error"]["details"]["source"][0]
    assert Skill.objects.get(name="tiny-skill").source == TEXT


def test_delete_retires_the_skill(admin):
    response = admin.delete("/api/v1/skills/churn-risk-playbook/")
    assert response.status_code == 204
    skill = Skill.objects.get(name="churn-risk-playbook")
    assert (skill.status, skill.version) == ("retired", 1)
    assert admin.get("/api/v1/skills/churn-risk-playbook/").json()["status"] == "retired"
    assert admin.get("/api/v1/skills/?status=retired").json()["count"] == 1


@pytest.mark.parametrize("persona", ["operator", "approver", "compliance"])
def test_only_governance_admins_write_skills(persona, request):
    client = request.getfixturevalue(persona)
    for response in (
        create(client),
        client.patch("/api/v1/skills/churn-risk-playbook/", {"status": "draft"}, format="json"),
        client.delete("/api/v1/skills/churn-risk-playbook/"),
    ):
        assert response.status_code == 403
    assert not Skill.objects.filter(name="tiny-skill").exists()
    assert Skill.objects.get(name="churn-risk-playbook").status == "active"
