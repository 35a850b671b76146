import hashlib
import re
from pathlib import Path

import pytest

from skills.parser import MAX_BYTES, ParsedSkill, SkillFormatError, parse_skill_md

LIBRARY = Path(__file__).resolve().parents[2] / "skills" / "library"
DEMO_TOOLS = {
    "list_accounts", "get_account", "get_usage_trend", "list_open_tickets", "compute_health_score",
    "calculator", "search_knowledge", "send_email", "delete_account",
}

GOOD = """---
name: account-health-review
description: Score one account.
tags: [health, account health]
allowed-tools: [get_account, compute_health_score]
version: 3
metadata:
  owner: cs
---

1. Call `get_account`.
2. Call `compute_health_score`.
"""


def doc(front: str, body: str = "1. Do the thing.\n") -> str:
    return f"---\n{front}\n---\n{body}"


def test_it_parses_a_complete_skill():
    skill = parse_skill_md(GOOD)
    assert isinstance(skill, ParsedSkill)
    assert skill.name == "account-health-review"
    assert skill.description == "Score one account."
    assert skill.tags == ("health", "account health")
    assert skill.allowed_tools == ("get_account", "compute_health_score")
    assert skill.version == 3
    assert skill.body.startswith("1. Call `get_account`.")
    assert skill.sha256 == hashlib.sha256(GOOD.encode("utf-8")).hexdigest()


def test_the_result_is_immutable():
    skill = parse_skill_md(GOOD)
    with pytest.raises(AttributeError):
        skill.name = "other"  # type: ignore[misc]


def test_optional_fields_default_to_empty():
    skill = parse_skill_md(doc("name: x\ndescription: y"))
    assert skill.tags == ()
    assert skill.allowed_tools == ()
    assert skill.version is None


def test_it_accepts_allowed_tools_as_a_space_or_comma_separated_string():
    skill = parse_skill_md(doc("name: x\ndescription: y\nallowed-tools: get_account, list_open_tickets calculator"))
    assert skill.allowed_tools == ("get_account", "list_open_tickets", "calculator")


def test_it_accepts_allowed_tools_spelled_with_an_underscore():
    skill = parse_skill_md(doc("name: x\ndescription: y\nallowed_tools: [calculator]"))
    assert skill.allowed_tools == ("calculator",)


def test_it_ignores_unknown_keys():
    skill = parse_skill_md(doc("name: x\ndescription: y\nlicense: MIT\nauthor: someone"))
    assert skill.name == "x"


def test_it_accepts_crlf_line_endings_and_a_bom():
    text = "\ufeff" + GOOD.replace("\n", "\r\n")
    skill = parse_skill_md(text)
    assert skill.name == "account-health-review"
    assert skill.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_hash_covers_the_exact_text():
    assert parse_skill_md(GOOD).sha256 != parse_skill_md(GOOD + "\n").sha256


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "must start with a '---' front matter block"),
        ("name: x\n---\nbody", "must start with a '---' front matter block"),
        ("# Title\n\n---\nname: x\n---\nbody", "must start with a '---' front matter block"),
        ("---\nname: x\ndescription: y\n", "front matter is not closed"),
        ("---\n---\nbody", "front matter is empty"),
        (doc("- a\n- b"), "front matter must be a mapping"),
        (doc("name: [unclosed"), "front matter is not valid YAML"),
        (doc("description: y"), "front matter: 'name' is required"),
        (doc("name:\ndescription: y"), "front matter: 'name' is required"),
        (doc("name: 12\ndescription: y"), "'name' must be a string"),
        (doc("name: Account-Health\ndescription: y"), "'name' must be lowercase"),
        (doc("name: account_health\ndescription: y"), "'name' must be lowercase"),
        (doc("name: a--b\ndescription: y"), "'name' must be lowercase"),
        (doc("name: -a\ndescription: y"), "'name' must be lowercase"),
        (doc(f"name: {'a' * 65}\ndescription: y"), "'name' must be at most 64"),
        (doc("name: x"), "front matter: 'description' is required"),
        (doc("name: x\ndescription: '  '"), "'description' must not be empty"),
        (doc("name: x\ndescription: [a]"), "'description' must be a string"),
        (doc(f"name: x\ndescription: {'d' * 1025}"), "'description' must be at most 1024"),
        (doc("name: x\ndescription: y\ntags: health"), "'tags' must be a list"),
        (doc("name: x\ndescription: y\ntags: [health, 3]"), "'tags' must be a list of non-empty strings"),
        (doc("name: x\ndescription: y\ntags: [health, '']"), "'tags' must be a list of non-empty strings"),
        (doc("name: x\ndescription: y\nallowed-tools: {a: 1}"), "'allowed-tools' must be a list"),
        (doc("name: x\ndescription: y\nallowed-tools: [get_account, 7]"), "invalid tool name"),
        (doc("name: x\ndescription: y\nallowed-tools: ['rm -rf']"), "invalid tool name"),
        (doc("name: x\ndescription: y\nallowed-tools: [a]\nallowed_tools: [b]"), "give 'allowed-tools' once"),
        (doc("name: x\ndescription: y\nversion: 0"), "'version' must be a positive integer"),
        (doc("name: x\ndescription: y\nversion: '2'"), "'version' must be a positive integer"),
        (doc("name: x\ndescription: y\nversion: 1.5"), "'version' must be a positive integer"),
        (doc("name: x\ndescription: y\nversion: true"), "'version' must be a positive integer"),
        (doc("name: x\ndescription: y", body="\n  \n"), "has no body"),
        ("---\nname: x\ndescription: y\n---", "has no body"),
    ],
)
def test_it_refuses_malformed_documents_with_a_clear_message(text, message):
    with pytest.raises(SkillFormatError, match=re.escape(message)):
        parse_skill_md(text)


def test_it_refuses_yaml_that_builds_python_objects():
    with pytest.raises(SkillFormatError, match="not valid YAML"):
        parse_skill_md(doc("name: !!python/object/apply:os.system ['true']\ndescription: y"))


def test_it_refuses_nul_characters():
    with pytest.raises(SkillFormatError, match="NUL"):
        parse_skill_md(GOOD + "\x00")


def test_it_refuses_text_that_is_not_valid_utf8():
    with pytest.raises(SkillFormatError, match="UTF-8"):
        parse_skill_md(GOOD + "\udcff")


def test_it_refuses_documents_over_the_size_limit():
    with pytest.raises(SkillFormatError, match="too large"):
        parse_skill_md(GOOD + "x" * MAX_BYTES)


def test_it_accepts_a_document_just_under_the_limit():
    text = GOOD + "x" * (MAX_BYTES - len(GOOD.encode()))
    assert parse_skill_md(text).name == "account-health-review"


@pytest.mark.parametrize("path", sorted(LIBRARY.glob("*/SKILL.md")), ids=lambda p: p.parent.name)
def test_every_library_skill_parses_and_names_only_allowed_demo_tools_as_steps(path):
    skill = parse_skill_md(path.read_text(encoding="utf-8"))
    assert skill.name == path.parent.name
    assert skill.version == 1
    assert skill.tags
    backticked = re.findall(r"`([^`]+)`", skill.body)
    assert backticked, "the scripted model plans from backticked tool names"
    assert set(backticked) <= DEMO_TOOLS
    assert set(backticked) <= set(skill.allowed_tools)


def test_the_library_has_the_three_demo_skills():
    names = sorted(p.parent.name for p in LIBRARY.glob("*/SKILL.md"))
    assert names == ["account-health-review", "churn-risk-playbook", "incident-summary"]


@pytest.mark.parametrize(
    "name, steps",
    [
        ("account-health-review", ["get_account", "get_usage_trend", "list_open_tickets", "compute_health_score"]),
        ("incident-summary", ["get_account", "list_open_tickets"]),
        ("churn-risk-playbook", ["list_accounts", "compute_health_score"]),
    ],
)
def test_library_skills_name_their_steps_in_calling_order(name, steps):
    skill = parse_skill_md((LIBRARY / name / "SKILL.md").read_text(encoding="utf-8"))
    assert re.findall(r"`([^`]+)`", skill.body) == steps


def test_account_health_review_allows_exactly_its_four_tools():
    skill = parse_skill_md((LIBRARY / "account-health-review" / "SKILL.md").read_text(encoding="utf-8"))
    assert set(skill.allowed_tools) == {"get_account", "get_usage_trend", "list_open_tickets", "compute_health_score"}
