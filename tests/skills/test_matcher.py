from pathlib import Path

import pytest

from skills.matcher import match_skills, matched_tags
from skills.parser import parse_skill_md

LIBRARY = Path(__file__).resolve().parents[2] / "skills" / "library"

HEALTH = {"name": "account-health-review", "description": "d", "tags": ["health", "healthy", "account health"]}
INCIDENT = {"name": "incident-summary", "description": "d", "tags": ["tickets", "open tickets", "outage"]}
CHURN = {"name": "churn-risk-playbook", "description": "d", "tags": ["churn", "churning", "at risk"]}


def names(results):
    return [r["name"] for r in results]


def test_a_tag_matches_as_a_whole_word_case_insensitively():
    assert names(match_skills([HEALTH], "HEALTH check for Acme")) == ["account-health-review"]


@pytest.mark.parametrize("text", ["healthcare accounts", "unhealthy", "health_check", "health2"])
def test_a_tag_does_not_match_inside_a_longer_word(text):
    assert matched_tags(["health"], text) == []


@pytest.mark.parametrize("text", ["health.", "(health)", "health?", "'health'", "health-check", "line\nhealth"])
def test_punctuation_bounds_a_word(text):
    assert matched_tags(["health"], text) == ["health"]


def test_a_phrase_matches_across_any_whitespace_but_not_partially():
    assert matched_tags(["account health"], "the account\n  health of Acme") == ["account health"]
    assert matched_tags(["account health"], "account healthy") == []
    assert matched_tags(["account health"], "health of the account") == []


def test_tags_with_regex_characters_are_literal():
    assert matched_tags(["c++", "p1 (urgent)"], "a c++ question about p1 (urgent) work") == ["c++", "p1 (urgent)"]
    assert matched_tags(["a.b"], "axb") == []


def test_results_carry_the_matched_tags_in_the_skills_order():
    [result] = match_skills([HEALTH], "Is the account healthy? Account health matters.")
    assert result["matched"] == ["health", "healthy", "account health"]
    assert result["description"] == "d"


def test_it_does_not_mutate_the_input():
    skill = dict(HEALTH)
    match_skills([skill], "health")
    assert "matched" not in skill


def test_more_matched_tags_rank_first_then_name():
    text = "Which accounts are at risk of churning, and what about their open tickets and health?"
    results = match_skills([INCIDENT, HEALTH, CHURN], text)
    assert names(results) == ["churn-risk-playbook", "incident-summary", "account-health-review"]
    assert [r["matched"] for r in results] == [["churning", "at risk"], ["tickets", "open tickets"], ["health"]]


def test_ties_are_broken_by_name():
    a = {"name": "b-skill", "tags": ["x"]}
    b = {"name": "a-skill", "tags": ["x"]}
    assert names(match_skills([a, b], "x")) == ["a-skill", "b-skill"]


def test_no_match_and_empty_inputs_give_nothing():
    assert match_skills([HEALTH, INCIDENT, CHURN], "What is 10% of Acme's ARR?") == []
    assert match_skills([HEALTH], "") == []
    assert match_skills([], "health") == []
    assert match_skills([{"name": "untagged", "tags": []}, {"name": "none"}], "health") == []


def library():
    return [
        {"name": s.name, "description": s.description, "tags": list(s.tags)}
        for s in (parse_skill_md(p.read_text(encoding="utf-8")) for p in sorted(LIBRARY.glob("*/SKILL.md")))
    ]


@pytest.mark.parametrize(
    "request_text, expected",
    [
        ("How healthy is Acme Corp?", ["account-health-review"]),
        ("Which accounts are most at risk of churning?", ["churn-risk-playbook"]),
        ("Summarise the open tickets for Globex.", ["incident-summary"]),
        ("List all accounts.", []),
        ("What is the usage trend for Umbrella?", []),
        ("What is 10% of Acme's ARR?", []),
        ("What does our knowledge base say about renewals?", []),
        ("Send an email to dana.whitfield@example.com about the Acme renewal.", []),
        ("Delete the account Initech.", []),
        ("What is Dana Whitfield's salary?", []),
        ("Tell me about our healthcare customers.", []),
    ],
)
def test_the_demo_requests_pick_the_intended_library_skill(request_text, expected):
    assert names(match_skills(library(), request_text)) == expected
