"""The policy engine's soundness, pure: what makes a policy unsound (validation, regexes RE2 cannot run
in linear time), and that evaluating an unsound one fails closed."""

import pytest

from governance import engine
from governance.engine import PolicyEvaluationError
from tests.governance.engine_specs import BROKEN, make


# Failing closed


def test_a_broken_regex_makes_the_intent_guard_fail_closed_whatever_the_text():
    broken = make("intent_guard", name="broken-guard", regex=BROKEN, priority=50)
    sound = make("intent_guard", keywords=["drop"], priority=10)
    with pytest.raises(PolicyEvaluationError) as caught:
        engine.intent_guard([sound, broken], agent="a", text="please drop it")
    assert caught.value.policy == "broken-guard"
    assert "invalid regex" in caught.value.reason
    with pytest.raises(PolicyEvaluationError):
        engine.intent_guard([broken], agent="a", text="nothing relevant")


def test_a_broken_regex_makes_input_decisions_fail_closed():
    broken = make("playbook", regex=BROKEN)
    with pytest.raises(PolicyEvaluationError):
        engine.input_decisions([broken], agent="a", text="churn", type_="playbook")


def test_a_broken_regex_makes_tool_approval_fail_closed():
    broken = make("tool_approval", regex=BROKEN)
    with pytest.raises(PolicyEvaluationError):
        engine.tool_approval([broken], agent="a", tool="send_email", text="hi")


def test_check_all_rejects_any_enabled_unsound_policy_for_the_agent():
    with pytest.raises(PolicyEvaluationError, match="broken-playbook"):
        engine.check_all([make("intent_guard"), make("playbook", name="broken-playbook", regex=BROKEN)], agent="a")
    with pytest.raises(PolicyEvaluationError):
        engine.check_all([make("tool_approval", approver_role=None)], agent="a")


def test_check_all_ignores_disabled_policies_and_those_of_other_agents():
    specs = [
        make("intent_guard"),
        make("playbook", regex=BROKEN, enabled=False),
        make("tool_guide", content="", agents=["b"]),
    ]
    assert engine.check_all(specs, agent="a") is None


def test_an_unsound_tool_guide_fails_closed():
    with pytest.raises(PolicyEvaluationError, match="needs content"):
        engine.tool_guides([make("tool_guide", content="  ")], agent="a", tool="send_email")


def test_an_unknown_policy_type_cannot_be_evaluated():
    with pytest.raises(PolicyEvaluationError, match="unknown policy type"):
        engine.intent_guard([make("intent_guard"), make("mystery")], agent="a", text="drop")


# Validation


@pytest.mark.parametrize("type_", engine.TYPES)
def test_a_sound_policy_of_each_type_has_no_problems(type_):
    assert engine.validate(make(type_)) == []


@pytest.mark.parametrize(
    ("type_", "overrides", "problem"),
    [
        ("mystery", {}, "unknown policy type 'mystery'"),
        ("intent_guard", {"match_mode": "most"}, "match_mode must be 'any' or 'all'"),
        ("intent_guard", {"keywords": ["drop", "  "]}, "keywords must be non-empty strings"),
        ("intent_guard", {"keywords": ["drop", 7]}, "keywords must be non-empty strings"),
        ("intent_guard", {"regex": BROKEN}, "invalid regex"),
        ("intent_guard", {"keywords": []}, "a intent_guard needs keywords or a regex"),
        ("playbook", {"keywords": []}, "a playbook needs keywords or a regex"),
        ("intent_guard", {"response": "  "}, "an intent guard needs the response"),
        ("playbook", {"content": ""}, "a playbook needs content"),
        ("tool_guide", {"target_tools": []}, "a tool_guide needs target tools"),
        ("tool_guide", {"content": "\n"}, "a tool_guide needs content"),
        ("tool_approval", {"target_tools": []}, "a tool_approval needs target tools"),
        ("tool_approval", {"approver_role": None}, "a tool approval needs an approver role"),
        ("tool_approval", {"approver_role": ""}, "a tool approval needs an approver role"),
        ("output_formatter", {"content": "Summary: {ANSWER}"}, "must contain {answer}"),
        ("output_formatter", {"content": ""}, "must contain {answer}"),
    ],
)
def test_validate_names_each_problem(type_, overrides, problem):
    problems = engine.validate(make(type_, **overrides))
    assert len(problems) == 1
    assert problem in problems[0]


def test_validate_reports_every_problem_at_once():
    problems = engine.validate(make("intent_guard", keywords=[], response="", match_mode="x"))
    assert len(problems) == 3


# Linear-time regexes (issue 24, finding 3)


def test_the_catastrophic_pattern_is_answered_by_re2():
    # On Python's backtracking re, ^(a+)+$ against 30 characters took 19 s and doubled with each
    # one more; 10,000 would never finish. The engine runs policy regexes on RE2 (linear time).
    spec = make("intent_guard", keywords=[], regex=r"^(a+)+$")
    assert engine.validate(spec) == []
    assert type(engine._compile(spec.name, spec.regex)).__module__.startswith("re2")
    assert engine.intent_guard([spec], agent="a", text="a" * 10_000 + "!") is None
    assert engine.intent_guard([spec], agent="a", text="a" * 10_000) is not None


@pytest.mark.parametrize(
    ("regex", "why"),
    [
        (r"(a)\1", "backreferences"),
        (r"(?P<x>a)(?P=x)", "named backreferences"),
        (r"pay(?=roll)", "lookahead"),
        (r"(?<!net )salary", "negative lookbehind"),
        (r"(?>a+)b", "atomic groups"),
        (r"a{2000}", "counted repetition"),
        (r"(?:[\pL\pN]{500}){1,2}", "too large"),
        # Python's re matched this; RE2's \b is ASCII, so it would silently never match
        ("\\b\u0437\u0430\u0440\u043f\u043b\u0430\u0442\u0430\\b", "ASCII letters only"),
    ],
)
def test_a_regex_re2_cannot_run_is_unsound_and_says_why(regex, why):
    spec = make("intent_guard", keywords=[], regex=regex)
    (problem,) = engine.validate(spec)
    assert "RE2" in problem and why in problem
    with pytest.raises(PolicyEvaluationError, match="RE2"):
        engine.intent_guard([spec], agent="a", text="anything")


def test_a_regex_in_another_script_matches_when_written_the_re2_way():
    spec = make("intent_guard", keywords=[], regex=r"(?:^|[^\pL\pN_])\x{437}\x{430}\x{440}\x{43f}\x{43b}\x{430}\x{442}\x{430}")
    assert engine.validate(spec) == []
    assert engine.match_text(spec, "\u043a\u0430\u043a\u0430\u044f \u0437\u0430\u0440\u043f\u043b\u0430\u0442\u0430?") is not None
