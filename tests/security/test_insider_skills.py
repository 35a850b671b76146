"""One governance admin taking a skill's contract out of force.

An active skill's contract (the tools a run may call while it is active, its declared side effects)
constrains every run that matches it, and putting one in force passes the golden set first. Taking
it out of force lifted the same constraint with no gate and no second person: retiring the skill
(API DELETE or PATCH, the workbench), sending it back to draft, or giving it new text, which starts
as a draft: there is one row per skill, so the version in force does not stay in force until the new
text is activated; it is out of force at once. Each of these now runs the golden set on the world
without the skill; past a failing set only two governance admins go (one asks with a reason, a
different one, neither the asker nor the text's author, confirms the same change), both named on
the history row. The platform (no user: load_demo) stays one step.
"""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model

from evals.models import EvalRun
from skills.models import Skill, SkillVersion
from skills.services import skill_import
from tests.skills.texts import HARMLESS, NARROW, in_force, narrow_in_force

pytestmark = pytest.mark.django_db
User = get_user_model()

REASON = "The account list must be read live again from today; ticket OPS-9 accepts the risk"
URL = "/api/v1/skills/accounts-without-tools/"


@pytest.fixture
def constraining(demo) -> Skill:
    return narrow_in_force()


def _last_version() -> SkillVersion:
    return SkillVersion.objects.filter(skill_name="accounts-without-tools").order_by("-id").first()


@pytest.mark.parametrize("change", [
    ("delete", None),
    ("patch", {"status": "retired"}),
    ("patch", {"status": "draft"}),
    ("patch", {"source": NARROW.replace("Answer from what you know", "Answer only from what you know")}),
])
def test_taking_a_skill_the_golden_set_needs_out_of_force_is_refused_with_the_report(admin, constraining, change):
    method, body = change
    answer = admin.delete(URL) if method == "delete" else admin.patch(URL, body, format="json")
    assert answer.status_code == 409, (answer.status_code, answer.content[:500])
    error = answer.json()["error"]
    assert (error["code"], error["details"]["removal"]) == ("gate_failed", True)
    assert "accounts-not-read" in error["details"]["report"]["broken"]
    gate = EvalRun.objects.get(id=error["details"]["eval_run"])
    assert (gate.status, gate.subject) == ("failed", "skill accounts-without-tools v1: take out of force")
    skill = Skill.objects.get(pk=constraining.pk)
    assert (skill.status, skill.sha256, skill.version) == ("active", constraining.sha256, 1)
    assert "accounts-without-tools" in in_force()


def test_an_emergency_removal_takes_a_second_admin_for_the_same_change_and_names_both(admin, governance_admin,
                                                                                       constraining):
    asked = admin.patch(URL, {"status": "retired", "emergency_reason": REASON}, format="json")
    assert asked.status_code == 202, asked.json()
    request = asked.json()["emergency_request"]
    assert (request["reason"], request["requested_by"], request["change"], request["to"]) == (
        REASON, "admin", "take_out_of_force", "retired")
    assert Skill.objects.get(pk=constraining.pk).status == "active"  # asking changes nothing in force
    refused = admin.patch(URL, {"status": "retired", "confirm_emergency": True}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "second_admin_required"
    other = governance_admin.api.patch(URL, {"status": "draft", "confirm_emergency": True}, format="json")
    assert other.status_code == 409 and other.json()["error"]["code"] == "no_emergency_request"
    assert Skill.objects.get(pk=constraining.pk).status == "active"
    done = governance_admin.api.patch(URL, {"status": "retired", "confirm_emergency": True}, format="json")
    assert done.status_code == 200, done.json()
    assert (done.json()["status"], done.json()["emergency_request"]) == ("retired", None)
    version = _last_version()
    mark = f"{REASON} (asked by admin, confirmed by {governance_admin.user.username})"
    assert (version.status, version.changed_by, version.emergency_requested_by.username, version.emergency_reason) == (
        "retired", governance_admin.user, "admin", mark)
    assert EvalRun.objects.get(id=version.eval_run_id).status == "failed"  # what the gate would have refused
    assert "accounts-without-tools" not in in_force()


def test_an_emergency_request_expires(admin, governance_admin, constraining, settings):
    assert admin.delete(URL).status_code == 409
    assert admin.patch(URL, {"status": "retired", "emergency_reason": REASON}, format="json").status_code == 202
    settings.WARRANT = {**settings.WARRANT, "SECOND_ADMIN_WINDOW_HOURS": 0}
    late = governance_admin.api.patch(URL, {"status": "retired", "confirm_emergency": True}, format="json")
    assert late.status_code == 409 and late.json()["error"]["code"] == "request_expired"
    assert Skill.objects.get(pk=constraining.pk).status == "active"


def test_new_text_past_a_failing_set_is_confirmed_on_that_text_and_stays_the_askers_to_review(
        admin, governance_admin, constraining):
    new = NARROW.replace("Answer from what you know", "Answer only from what you know")
    asked = admin.patch(URL, {"source": new, "emergency_reason": REASON}, format="json")
    assert asked.status_code == 202, asked.json()
    assert asked.json()["source"] == NARROW and asked.json()["emergency_request"]["new_sha256"] is not None
    elsewise = governance_admin.api.patch(URL, {"source": new + "\nAnd more.\n", "confirm_emergency": True},
                                          format="json")
    assert elsewise.status_code == 409 and elsewise.json()["error"]["code"] == "no_emergency_request"
    done = governance_admin.api.patch(URL, {"source": new, "confirm_emergency": True}, format="json")
    assert done.status_code == 200, done.json()
    skill = Skill.objects.get(pk=constraining.pk)
    assert (skill.status, skill.version, skill.source, skill.author.username) == ("draft", 2, new, "admin")
    assert "accounts-without-tools" not in in_force()  # the version that was active is out of force
    # The text is the asker's: they may not approve it themselves.
    mine = admin.patch(URL, {"status": "approved"}, format="json")
    assert mine.status_code == 403, mine.json()


def test_a_skill_the_set_does_not_need_is_retired_by_one_admin_with_its_gate_on_the_history(admin):
    skill, _ = skill_import(text=HARMLESS, status=Skill.Status.ACTIVE)
    answer = admin.patch(URL, {"source": HARMLESS.replace("memory only", "memory alone")}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "draft" and "accounts-without-tools" not in in_force()
    version = _last_version()
    gate = EvalRun.objects.get(id=version.eval_run_id)
    assert (gate.status, gate.subject, version.emergency_reason) == (
        "passed", "skill accounts-without-tools v1: take out of force", "")


def test_the_platform_takes_a_skill_out_of_force_in_one_step(constraining):
    runs = EvalRun.objects.count()
    skill, _ = skill_import(text=NARROW, status=Skill.Status.RETIRED)
    assert skill.status == "retired" and EvalRun.objects.count() == runs


def test_the_workbench_goes_through_the_same_gate_and_does_not_delete_an_active_skill(admin_client, constraining):
    change = f"/admin/skills/skill/{constraining.pk}/change/"
    refused = admin_client.post(change, {"source": NARROW, "status": "retired"}, follow=True).content.decode()
    assert "Not saved" in refused and "does not pass without skill" in refused
    assert "was changed successfully" not in refused
    assert Skill.objects.get(pk=constraining.pk).status == "active"
    assert not LogEntry.objects.filter(object_id=str(constraining.pk), content_type__model="skill").exists()
    assert admin_client.post(f"/admin/skills/skill/{constraining.pk}/delete/", {"post": "yes"}).status_code == 403
    admin_client.raise_request_exception = False  # Django's bulk delete refuses with PermissionDenied
    bulk = admin_client.post("/admin/skills/skill/", {"action": "delete_selected",
                                                      "_selected_action": [constraining.pk], "post": "yes"})
    assert bulk.status_code == 403
    assert Skill.objects.get(pk=constraining.pk).status == "active"
    admin_client.post(change, {"source": NARROW, "status": "retired", "emergency_reason_given": REASON})
    skill = Skill.objects.get(pk=constraining.pk)
    assert (skill.status, skill.emergency_request_reason, skill.emergency_request_action) == (
        "active", REASON, "retired")
