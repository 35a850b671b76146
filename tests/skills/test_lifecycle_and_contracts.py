"""Skills with contracts: front matter validated with file/line/field, a reviewed lifecycle,
allowed-tools enforced on what the model sees and calls, and an exact folder round trip."""

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from agents.models import Agent, ModelProfile, Tool
from agents.services import agent_publish
from governance.tokens import token_issue
from runs.models import Receipt
from skills.models import Skill
from skills.parser import SkillFormatError, parse_skill_md
from skills.services import skill_import
from tests.runs.helpers import run_script

pytestmark = pytest.mark.django_db

LIBRARY = Path(__file__).resolve().parents[2] / "skills" / "library"

CONTRACT = """---
name: arithmetic-helper
description: Work out sums with the calculator.
tags: [arithmetic]
allowed-tools: [calculator]
inputs:
  expression: The arithmetic to evaluate.
  precision: {type: integer, description: digits after the point, required: false}
outputs:
  result: {type: number}
side-effects: none
---

1. Call `calculator` with the expression.
"""


def test_contract_fields_are_parsed_and_normalised():
    parsed = parse_skill_md(CONTRACT)
    assert parsed.inputs == {
        "expression": {"type": "string", "description": "The arithmetic to evaluate.", "required": True},
        "precision": {"type": "integer", "description": "digits after the point", "required": False},
    }
    assert parsed.outputs == {"result": {"type": "number", "description": "", "required": True}}
    assert parsed.side_effects == ()


@pytest.mark.parametrize(("old", "new", "line", "field", "message"), [
    ("  result: {type: number}", "  result: {type: money}", 10, "outputs.result", "'outputs.result.type' must be one of"),
    ("  precision: {type: integer, description: digits after the point, required: false}",
     "  precision: {type: integer, required: maybe}", 8, "inputs.precision", "'inputs.precision.required' must be true or false"),
    ("side-effects: none", "side-effects: [send_email]", 11, "side-effects", "which 'allowed-tools' does not allow"),
    ("allowed-tools: [calculator]", "allowed-tools: [rm -rf]", 5, "allowed-tools", "invalid tool name"),
    ("name: arithmetic-helper", "name: Arithmetic Helper", 2, "name", "lowercase letters"),
])
def test_a_contract_error_names_its_line_and_field(old, new, line, field, message):
    with pytest.raises(SkillFormatError) as caught:
        parse_skill_md(CONTRACT.replace(old, new))
    error = caught.value
    assert (error.line, error.field) == (line, field)
    assert message in str(error) and str(error).startswith(f"line {line}: ")
    assert str(error.at(file="skills/x/SKILL.md")).startswith(f"skills/x/SKILL.md:{line}: ")


def test_the_import_command_reports_file_line_and_field(tmp_path):
    bad = tmp_path / "bad" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text(CONTRACT.replace("{type: number}", "{type: money}"))
    with pytest.raises(CommandError) as caught:
        call_command("import_skills", str(tmp_path))
    assert f"{bad}:10: front matter: 'outputs.result.type'" in str(caught.value)
    assert "[field: outputs.result]" in str(caught.value)


def _governance_admin(username: str) -> APIClient:
    user = User.objects.create_user(username)
    user.groups.add(Group.objects.get(name="governance-admins"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_issue(user=user, via='command', issued_by='test')[1]}")
    return client


def test_a_skill_is_approved_by_another_governance_admin_then_activated_then_retired(admin):
    created = admin.post("/api/v1/skills/", {"source": CONTRACT}, format="json")
    assert created.status_code == 201 and created.json()["status"] == "draft"
    assert created.json()["author"] == "admin"
    url = "/api/v1/skills/arithmetic-helper/"

    own = admin.patch(url, {"status": "approved"}, format="json")
    assert own.status_code == 403 and "author may not approve" in own.json()["error"]["message"]
    skipped = admin.patch(url, {"status": "active"}, format="json")
    assert skipped.status_code == 409 and skipped.json()["error"]["code"] == "invalid_transition"

    reviewer = _governance_admin("reviewer")
    approved = reviewer.patch(url, {"status": "approved"}, format="json")
    assert approved.status_code == 200, approved.json()
    assert (approved.json()["status"], approved.json()["approved_by"]) == ("approved", "reviewer")
    assert admin.patch(url, {"status": "active"}, format="json").json()["status"] == "active"

    # New text is a new version and goes back to draft: runs keep using reviewed text only.
    edited = admin.patch(url, {"source": CONTRACT.replace("Work out sums", "Work out sums exactly")}, format="json")
    assert (edited.json()["status"], edited.json()["version"], edited.json()["approved_by"]) == ("draft", 2, None)
    assert admin.post("/api/v1/skills/", {"source": CONTRACT.replace("arithmetic-helper", "other-helper"),
                                          "status": "active"}, format="json").status_code == 409
    assert admin.delete(url).status_code == 204
    assert Skill.objects.get(name="arithmetic-helper").status == "retired"


@pytest.fixture
def replay(demo):
    profile = ModelProfile.objects.create(name="replay", backend="replay", model="replay-1")
    agent = Agent.objects.create(slug="replayer", name="Replayer", instructions="Follow the script.",
                                 model_profile=profile)
    agent.tools.set(Tool.objects.all())
    agent_publish(agent=agent)
    return run_script


def _events(run, kind):
    return [e.data for e in run.events.filter(kind=kind).order_by("seq")]


SCRIPT = {"topic": "arithmetic", "turns": [[{"name": "get_account", "arguments": {"query": "Acme"}},
                                            {"name": "calculator", "arguments": {"expression": "2 + 2"}}]]}


def test_a_draft_skill_never_reaches_a_run(replay):
    skill_import(text=CONTRACT)  # a draft
    run = replay(SCRIPT | {"turns": SCRIPT["turns"] + [[{"name": "load_skill", "arguments": {"name": "arithmetic-helper"}}]]})
    assert "arithmetic-helper" not in [s["name"] for s in run.snapshot["skills"]]
    assert _events(run, "skill_activated") == []
    codes = [e["result"].get("code", "") for e in _events(run, "tool_call")]
    assert codes == ["", "", "not_found"]  # both tools ran; load_skill found no such skill


def test_an_active_skills_allowed_tools_narrow_what_the_model_sees_and_may_call(replay):
    skill_import(text=CONTRACT, status=Skill.Status.ACTIVE)
    run = replay(SCRIPT)
    assert _events(run, "skill_activated")[0]["skill"] == "arithmetic-helper"
    assert set(_events(run, "model_call")[0]["tools_shown"]) == {"calculator", "load_skill"}
    calls = {e["name"]: e["result"] for e in _events(run, "tool_call")}
    assert calls["get_account"]["code"] == "not_permitted"
    assert "allowed tools" in calls["get_account"]["error"]
    assert calls["calculator"]["ok"] is True
    body = json.loads(Receipt.objects.get(run=run).body)
    skill = Skill.objects.get(name="arithmetic-helper")
    assert body["skills_used"] == [{"name": "arithmetic-helper", "version": skill.version, "sha256": skill.sha256}]


def test_an_active_skill_may_change_only_what_it_declares_among_its_side_effects(replay):
    from agents.models import SentEmail
    from runs.models import ApprovalRequest

    email = {"name": "send_email", "arguments": {"to": "dana.whitfield@example.com", "subject": "Sums", "body": "4"}}
    script = {"topic": "arithmetic", "turns": [[email]]}
    # Allowed, but not declared as a side effect (side-effects: none): refused before any approval.
    skill_import(text=CONTRACT.replace("allowed-tools: [calculator]", "allowed-tools: [calculator, send_email]"),
                 status=Skill.Status.ACTIVE)
    run = replay(script)
    [call] = _events(run, "tool_call")
    assert call["result"]["code"] == "not_permitted" and "side effects" in call["result"]["error"]
    assert run.status == "succeeded" and not ApprovalRequest.objects.filter(run=run).exists()
    assert SentEmail.objects.count() == 0
    # Declared: the call goes on to the approval policy that governs it, as any other would.
    skill_import(text=CONTRACT.replace("allowed-tools: [calculator]", "allowed-tools: [calculator, send_email]")
                 .replace("side-effects: none", "side-effects: [send_email]"), status=Skill.Status.ACTIVE)
    run = replay(script)
    assert run.status == "awaiting_approval" and _events(run, "tool_call") == []


def test_a_hostile_tool_result_does_not_unlock_a_side_effect(replay):
    call_command("register_python_tools", "py", "tests.tools.pyfuncs")
    Tool.objects.filter(name__in=["py__fetch_note", "py__add"]).update(enabled=True)
    Tool.objects.filter(name="py__add").update(side_effect=True)  # no approval policy names it
    operators = Group.objects.get(name="operators")
    for name in ("py__fetch_note", "py__add"):
        operators.tool_grants.create(tool=Tool.objects.get(name=name))
    agent = Agent.objects.get(slug="replayer")
    agent.tools.add(*Tool.objects.filter(tool_source__name="py"))
    agent_publish(agent=agent)

    clean = replay({"turns": [[{"name": "py__add", "arguments": {"a": 1}}]]})
    assert clean.status == "succeeded"  # untainted: the side effect runs without approval

    run = replay({"turns": [[{"name": "py__fetch_note", "arguments": {"topic": "renewals"}}],
                            [{"name": "py__add", "arguments": {"a": 1}}]]})
    assert _events(run, "tainted"), "the note reads like injected orders"
    assert run.status == "awaiting_approval"
    assert [e["name"] for e in _events(run, "tool_call")] == ["py__fetch_note"]  # the side effect waits


def test_a_folder_of_skills_round_trips_exactly(demo, tmp_path, capsys):
    call_command("export_skills", str(tmp_path))
    for original in sorted(LIBRARY.glob("*/SKILL.md")):
        exported = tmp_path / original.parent.name / "SKILL.md"
        assert exported.read_bytes() == original.read_bytes()
    before = {s.name: (s.version, s.sha256, s.status, s.updated_at) for s in Skill.objects.all()}
    capsys.readouterr()
    call_command("import_skills", str(tmp_path))
    out = capsys.readouterr().out
    assert out.count("unchanged") == len(before) == 3
    assert {s.name: (s.version, s.sha256, s.status, s.updated_at) for s in Skill.objects.all()} == before
    with pytest.raises(CommandError, match="no such skill: nope"):
        call_command("export_skills", str(tmp_path), "nope")
