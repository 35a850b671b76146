"""The policy engine, pure: no database, no settings."""

import itertools
import json

import pytest

from governance import engine
from governance.engine import PolicyEvaluationError, PolicySpec

_ids = itertools.count(1)

DEFAULTS = {
    "intent_guard": {"keywords": ("drop",), "response": "I can't help with that."},
    "playbook": {"keywords": ("churn",), "content": "1. List the accounts.\n2. Score them."},
    "tool_guide": {"target_tools": ("send_email",), "content": "Keep it short."},
    "tool_approval": {"target_tools": ("send_email",), "approver_role": "secops"},
    "output_formatter": {"content": "Summary:\n{answer}\n-- end"},
}


def make(type_: str, **overrides) -> PolicySpec:
    """A sound policy of `type_`; overrides change any field."""
    id_ = overrides.pop("id", next(_ids))
    values = {"id": id_, "name": f"{type_}-{id_}", "type": type_, "version": 1, **DEFAULTS.get(type_, {}), **overrides}
    for key in ("agents", "keywords", "target_tools"):
        values[key] = tuple(values.get(key, ()))
    return PolicySpec(**values)


def guard_names(specs, text, agent="a"):
    return [spec.name for spec, _ in engine.input_decisions(specs, agent=agent, text=text, type_="intent_guard")]


# Matching on words


@pytest.mark.parametrize(
    ("keyword", "text"),
    [("drop", "please drop it"), ("DROP", "please drop it"), ("drop", "Please DROP it."), ("drop", "(drop)"),
     ("drop", "drop-down"), ("drop", "line one\ndrop")],
)
def test_a_keyword_matches_a_whole_word_case_insensitively(keyword, text):
    assert engine.match_text(make("intent_guard", keywords=[keyword]), text) == (keyword,)


@pytest.mark.parametrize("text", ["open the dropdown", "a backdrop", "drop_table now", "drops", "drop2", ""])
def test_a_keyword_does_not_match_inside_a_longer_word(text):
    assert engine.match_text(make("intent_guard", keywords=["drop"]), text) is None


def test_a_phrase_matches_across_any_whitespace_but_not_partially():
    spec = make("playbook", keywords=["at risk"])
    assert engine.match_text(spec, "Which accounts are AT RISK?") == ("at risk",)
    assert engine.match_text(spec, "accounts at\n   risk") == ("at risk",)
    assert engine.match_text(spec, "is that risky at all") is None
    assert engine.match_text(spec, "at risky prices") is None
    assert engine.match_text(spec, "risk at the door") is None


def test_keywords_with_regex_characters_match_literally():
    assert engine.match_text(make("playbook", keywords=["c++"]), "a c++ question") == ("c++",)
    assert engine.match_text(make("playbook", keywords=["a.b"]), "axb") is None


def test_any_mode_fires_on_one_keyword_and_names_only_the_ones_found():
    spec = make("intent_guard", keywords=["salary", "payroll", "bonus"], match_mode="any")
    assert engine.match_text(spec, "When does payroll run, and what about my bonus?") == ("payroll", "bonus")
    assert engine.match_text(spec, "What is our ARR?") is None


def test_all_mode_fires_only_when_every_keyword_is_found():
    spec = make("intent_guard", keywords=["delete", "account"], match_mode="all")
    assert engine.match_text(spec, "please delete it") is None
    assert engine.match_text(spec, "which account?") is None
    assert engine.match_text(spec, "Account 7: delete it") == ("delete", "account")


def test_a_regex_is_an_alternative_match_named_by_the_text_it_matched():
    spec = make("intent_guard", keywords=["drop"], regex=r"delete\s+from\s+\w+")
    decision = engine.intent_guard([spec], agent="a", text="run DELETE FROM accounts now")[1]
    assert decision.matched == ("regex:DELETE FROM accounts",)
    assert decision.explain()["matched"] == ["regex:DELETE FROM accounts"]


def test_a_regex_alone_matches_case_insensitively():
    spec = make("intent_guard", keywords=[], regex=r"\bssn\b")
    assert engine.match_text(spec, "what is her SSN") == ("regex:SSN",)
    assert engine.match_text(spec, "lesson") is None


def test_a_regex_rescues_an_all_mode_policy_whose_keywords_fall_short():
    spec = make("intent_guard", keywords=["delete", "account"], match_mode="all", regex=r"wipe\b")
    assert engine.match_text(spec, "delete and wipe") == ("regex:wipe",)
    assert engine.match_text(spec, "delete it") is None


def test_keywords_that_match_are_reported_rather_than_the_regex():
    spec = make("intent_guard", keywords=["drop"], regex="table")
    assert engine.match_text(spec, "drop the table") == ("drop",)


def test_a_policy_without_keywords_or_regex_matches_every_text():
    assert engine.match_text(make("output_formatter"), "anything at all") == ()
    assert engine.match_text(make("tool_approval"), "") == ()


def test_an_unknown_match_mode_cannot_be_evaluated():
    with pytest.raises(PolicyEvaluationError, match="match mode"):
        engine.match_text(make("intent_guard", match_mode="most"), "drop")


# Failing closed


BROKEN = r"([unclosed"


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


# Enabled, agents, priority


def test_disabled_policies_never_fire():
    specs = [make(t, enabled=False) for t in engine.TYPES]
    text = "please drop the churn report"
    assert engine.intent_guard(specs, agent="a", text=text) is None
    for type_ in ("intent_guard", "playbook", "output_formatter"):
        assert engine.input_decisions(specs, agent="a", text=text, type_=type_) == []
    assert engine.tool_guides(specs, agent="a", tool="send_email") == []
    assert engine.tool_approval(specs, agent="a", tool="send_email", text=text) is None


def test_a_policy_scoped_to_one_agent_never_fires_for_another():
    specs = [make(t, agents=["a"]) for t in engine.TYPES]
    text = "please drop the churn report"
    for agent, fires in (("a", True), ("b", False)):
        assert (engine.intent_guard(specs, agent=agent, text=text) is not None) is fires
        assert bool(engine.input_decisions(specs, agent=agent, text=text, type_="playbook")) is fires
        assert bool(engine.input_decisions(specs, agent=agent, text=text, type_="output_formatter")) is fires
        assert bool(engine.tool_guides(specs, agent=agent, tool="send_email")) is fires
        assert (engine.tool_approval(specs, agent=agent, tool="send_email", text=text) is not None) is fires


def test_an_unscoped_policy_fires_for_every_agent_and_a_multi_agent_scope_for_each():
    unscoped = make("intent_guard")
    both = make("intent_guard", agents=["a", "b"])
    for agent in ("a", "b", "c"):
        assert unscoped.name in guard_names([unscoped, both], "drop", agent=agent)
    assert guard_names([both], "drop", agent="b") == [both.name]
    assert guard_names([both], "drop", agent="c") == []


def test_policies_fire_in_priority_order_lowest_first_then_by_id():
    late = make("intent_guard", id=1, priority=90)
    early = make("intent_guard", id=3, priority=5)
    tie = make("intent_guard", id=2, priority=5)
    assert guard_names([late, early, tie], "drop") == [tie.name, early.name, late.name]


def test_the_intent_guard_returns_the_highest_priority_match():
    low = make("intent_guard", priority=100, response="low")
    high = make("intent_guard", priority=1, response="high")
    other = make("intent_guard", priority=0, keywords=["salary"])
    spec, decision = engine.intent_guard([low, other, high], agent="a", text="drop it")
    assert spec is high
    assert decision.policy_id == high.id


def test_no_intent_guard_firing_gives_none():
    assert engine.intent_guard([make("intent_guard")], agent="a", text="hello") is None
    assert engine.intent_guard([], agent="a", text="drop") is None


# Tools


def test_a_tool_guide_applies_to_its_named_tools_only():
    guide = make("tool_guide", target_tools=["send_email", "draft_email"])
    [(spec, decision)] = engine.tool_guides([guide], agent="a", tool="draft_email")
    assert spec is guide and decision.matched == ("draft_email",)
    assert engine.tool_guides([guide], agent="a", tool="delete_account") == []


def test_a_star_tool_guide_applies_to_every_tool_in_priority_order():
    star = make("tool_guide", target_tools=["*"], priority=20)
    named = make("tool_guide", target_tools=["send_email"], priority=10)
    for tool, expected in (("send_email", [named, star]), ("list_accounts", [star])):
        assert [s for s, _ in engine.tool_guides([star, named], agent="a", tool=tool)] == expected


def test_a_tool_approval_parks_only_its_target_tools():
    rule = make("tool_approval", target_tools=["send_email", "delete_account"])
    spec, decision = engine.tool_approval([rule], agent="a", tool="delete_account", text="anything")
    assert spec is rule and decision.matched == ("delete_account",)
    assert engine.tool_approval([rule], agent="a", tool="list_accounts", text="anything") is None


def test_a_star_tool_approval_parks_every_tool():
    rule = make("tool_approval", target_tools=["*"])
    assert engine.tool_approval([rule], agent="a", tool="calculator", text="x") is not None


def test_a_tool_approval_with_keywords_parks_only_when_the_input_matches():
    rule = make("tool_approval", target_tools=["send_email"], keywords=["customer", "external"])
    assert engine.tool_approval([rule], agent="a", tool="send_email", text="mail the team") is None
    spec, decision = engine.tool_approval([rule], agent="a", tool="send_email", text="mail the CUSTOMER")
    assert decision.matched == ("send_email", "customer")
    assert engine.tool_approval([rule], agent="a", tool="list_accounts", text="mail the customer") is None


def test_the_first_tool_approval_by_priority_wins_and_non_matching_ones_are_skipped():
    keyworded = make("tool_approval", priority=1, keywords=["urgent"], approver_role="oncall")
    general = make("tool_approval", priority=50, approver_role="secops")
    later = make("tool_approval", priority=90, approver_role="compliance")
    spec, _ = engine.tool_approval([later, general, keyworded], agent="a", tool="send_email", text="routine")
    assert spec is general
    spec, _ = engine.tool_approval([later, general, keyworded], agent="a", tool="send_email", text="urgent!")
    assert spec is keyworded


# The five types alone and together


def test_each_type_only_answers_for_itself():
    text = "please drop the churn report"
    for type_ in engine.TYPES:
        specs = [make(type_)]
        assert (engine.intent_guard(specs, agent="a", text=text) is not None) is (type_ == "intent_guard")
        assert bool(engine.input_decisions(specs, agent="a", text=text, type_="playbook")) is (type_ == "playbook")
        assert bool(engine.input_decisions(specs, agent="a", text=text, type_="output_formatter")) is (
            type_ == "output_formatter"
        )
        assert bool(engine.tool_guides(specs, agent="a", tool="send_email")) is (type_ == "tool_guide")
        assert (engine.tool_approval(specs, agent="a", tool="send_email", text=text) is not None) is (
            type_ == "tool_approval"
        )


def test_all_five_types_together_each_decide_their_own_part():
    guard = make("intent_guard", keywords=["salary", "payroll"], response="Ask HR.")
    playbook = make("playbook", keywords=["churn", "at risk"])
    guide = make("tool_guide", target_tools=["send_email"])
    approval = make("tool_approval", target_tools=["send_email", "delete_account"])
    formatter = make("output_formatter", keywords=["summary"], content="Executive summary\n{answer}")
    always = make("output_formatter", content="{answer}\n-- CRM assistant", priority=200)
    specs = [formatter, approval, always, guide, playbook, guard]
    engine.check_all(specs, agent="a")

    text = "Which accounts are at risk? Give me a summary."
    assert engine.intent_guard(specs, agent="a", text=text) is None
    [(spec, decision)] = engine.input_decisions(specs, agent="a", text=text, type_="playbook")
    assert spec is playbook and decision.matched == ("at risk",)
    assert [s for s, _ in engine.tool_guides(specs, agent="a", tool="send_email")] == [guide]
    assert engine.tool_guides(specs, agent="a", tool="list_accounts") == []
    assert engine.tool_approval(specs, agent="a", tool="delete_account", text=text)[0] is approval
    assert engine.tool_approval(specs, agent="a", tool="list_accounts", text=text) is None
    formatters = engine.input_decisions(specs, agent="a", text=text, type_="output_formatter")
    assert [s for s, _ in formatters] == [formatter, always]
    answer = "Acme"
    for spec, _ in formatters:
        answer = engine.format_output(spec, answer=answer)
    assert answer == "Executive summary\nAcme\n-- CRM assistant"

    spec, decision = engine.intent_guard(specs, agent="a", text="What is the payroll date for churn analysts?")
    assert spec is guard and spec.response == "Ask HR." and decision.matched == ("payroll",)
    def formatters_for(text):
        return [s for s, _ in engine.input_decisions(specs, agent="a", text=text, type_="output_formatter")]

    assert formatters_for("no summary here") == [formatter, always]
    assert formatters_for("plain") == [always]


# Explanations and snapshots


def test_every_decision_explains_which_policy_version_type_and_match():
    guard = make("intent_guard", id=11, name="no-drops", version=3, keywords=["drop"])
    playbook = make("playbook", id=12, name="churn-steps", version=2)
    guide = make("tool_guide", id=13, name="mail-style", version=4)
    approval = make("tool_approval", id=14, name="mail-review", version=5, keywords=["customer"])
    formatter = make("output_formatter", id=15, name="exec", version=6, keywords=["brief"])
    specs = [guard, playbook, guide, approval, formatter]
    text = "\uff24\uff32\uff2f\uff30 the churn brief to the customer"  # DROP in fullwidth letters
    decisions = [
        engine.intent_guard(specs, agent="a", text=text)[1],
        engine.input_decisions(specs, agent="a", text=text, type_="playbook")[0][1],
        engine.tool_guides(specs, agent="a", tool="send_email")[0][1],
        engine.tool_approval(specs, agent="a", tool="send_email", text=text)[1],
        engine.input_decisions(specs, agent="a", text=text, type_="output_formatter")[0][1],
    ]
    assert [d.explain() for d in decisions] == [
        {"policy_id": 11, "policy": "no-drops", "version": 3, "type": "intent_guard", "matched": ["drop"],
         "quoted": ["\uff24\uff32\uff2f\uff30"]},
        {"policy_id": 12, "policy": "churn-steps", "version": 2, "type": "playbook", "matched": ["churn"],
         "quoted": ["churn"]},
        {"policy_id": 13, "policy": "mail-style", "version": 4, "type": "tool_guide", "matched": ["send_email"]},
        {"policy_id": 14, "policy": "mail-review", "version": 5, "type": "tool_approval",
         "matched": ["send_email", "customer"], "quoted": ["customer"]},
        {"policy_id": 15, "policy": "exec", "version": 6, "type": "output_formatter", "matched": ["brief"],
         "quoted": ["brief"]},
    ]
    json.dumps([d.explain() for d in decisions])


def test_the_snapshot_hash_is_stable_for_equal_specs_even_through_json():
    specs = [make("intent_guard", id=1, agents=["a"]), make("tool_approval", id=2)]
    again = [PolicySpec.from_dict(d) for d in json.loads(json.dumps([s.to_dict() for s in specs]))]
    assert again == specs
    assert engine.snapshot_sha256(again) == engine.snapshot_sha256(specs)
    assert len(engine.snapshot_sha256(specs)) == 64


def test_the_snapshot_hash_changes_when_a_version_or_any_value_changes():
    base = make("intent_guard", id=1, version=1)
    digest = engine.snapshot_sha256([base])
    assert engine.snapshot_sha256([make("intent_guard", id=1, version=2)]) != digest
    assert engine.snapshot_sha256([make("intent_guard", id=1, enabled=False)]) != digest
    assert engine.snapshot_sha256([make("intent_guard", id=1, keywords=["drop", "truncate"])]) != digest
    assert engine.snapshot_sha256([]) != digest


def test_from_dict_turns_lists_into_tuples():
    spec = PolicySpec.from_dict({"id": 1, "name": "n", "type": "tool_guide", "version": 1,
                                 "agents": ["a"], "keywords": None, "target_tools": ["*"], "content": "c"})
    assert (spec.agents, spec.keywords, spec.target_tools) == (("a",), (), ("*",))
    hash(spec)


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


# Formatting


def test_format_output_substitutes_an_answer_that_holds_braces():
    spec = make("output_formatter", content="{{literal}} {0} Summary:\n{answer}\nEnd {x}")
    answer = 'JSON: {"arr": 1200} and {answer} and {0}'
    assert engine.format_output(spec, answer=answer) == (
        '{{literal}} {0} Summary:\nJSON: {"arr": 1200} and {answer} and {0}\nEnd {x}'
    )


def test_format_output_fills_every_placeholder():
    assert engine.format_output(make("output_formatter", content="{answer} / {answer}"), answer="A") == "A / A"


# Text as a person reads it (issue 24, finding 5)

ZWSP, ZWJ, ZWNJ, SHY, WJ, LRM = "\u200b", "\u200d", "\u200c", "\u00ad", "\u2060", "\u200e"


def _between(word: str, sep: str) -> str:
    return sep.join(word)


def _after_each_letter(word: str, mark: str) -> str:
    return "".join(ch + mark for ch in word)


SALARY_VARIANTS = {
    "plain": "salary",
    "upper case": "SALARY",
    "Cyrillic a": "s\u0430l\u0430ry",
    "Cyrillic dze, a, u": "\u0455\u0430l\u0430r\u0443",
    "Cyrillic capitals": "\u0405\u0410L\u0410RY",
    "Greek alpha": "s\u03b1l\u03b1ry",
    "fullwidth": "\uff53\uff41\uff4c\uff41\uff52\uff59",
    "fullwidth capitals": "\uff33\uff21\uff2c\uff21\uff32\uff39",
    "mathematical bold": "\U0001d42c\U0001d41a\U0001d425\U0001d41a\U0001d42b\U0001d432",
    "combining acute": _after_each_letter("salary", "\u0301"),
    "combining underline": _after_each_letter("salary", "\u0332"),
    "zalgo stack": _after_each_letter("salary", "\u0336\u0311\u0323"),
    "zero-width spaces": _between("salary", ZWSP),
    "ZWJ and ZWNJ": "s" + ZWJ + "a" + ZWNJ + "l" + ZWJ + "a" + ZWNJ + "r" + ZWJ + "y",
    "soft hyphen": "sal" + SHY + "ary",
    "tag characters": _between("salary", "\U000e0020"),
    "variation selectors": _between("salary", "\ufe0f"),
    "word joiners and bidi marks": "s" + WJ + "al" + LRM + "ary",
    "mixed": "\u0455" + ZWSP + "\uff41l\u0301" + SHY + "\u0430\uff52\u0443",
}


@pytest.mark.parametrize("variant", SALARY_VARIANTS.values(), ids=SALARY_VARIANTS.keys())
def test_a_guard_on_salary_blocks_every_way_of_writing_it_and_quotes_it_as_sent(variant):
    guard = make("intent_guard", keywords=["salary"], response="Ask HR.")
    text = f"What is Dana's {variant} this year?"
    fired = engine.intent_guard([guard], agent="a", text=text)
    assert fired is not None, ascii(variant)
    spec, decision = fired
    assert decision.matched == ("salary",)
    assert decision.quoted == (variant,)
    assert decision.explain()["quoted"] == [variant]


def test_lookalikes_still_match_whole_words_only():
    guard = make("intent_guard", keywords=["salary"])
    assert engine.match_text(guard, "my \uff53\uff41\uff4c\uff41\uff52\uff59man") is None  # "salaryman"
    assert engine.match_text(guard, "sal" + SHY + "ary_band") is None


def test_a_keyword_written_with_lookalikes_matches_the_plain_word():
    guard = make("intent_guard", keywords=["s\u0430l\u0430ry"])  # the policy's own keyword in Cyrillic
    assert engine.match_text(guard, "your salary") == ("s\u0430l\u0430ry",)


def test_a_regex_also_sees_the_text_as_read_and_quotes_the_original():
    spec = make("intent_guard", keywords=[], regex=r"\bdelete\s+from\b")
    decision = engine.intent_guard([spec], agent="a", text="please d\u0435l" + ZWSP + "ete FROM accounts")[1]
    assert decision.matched == ("regex:d\u0435l" + ZWSP + "ete FROM",)
    digits = make("intent_guard", keywords=[], regex=r"\b\d{3}-\d{2}-\d{4}\b")
    assert engine.match_text(digits, "ssn 123" + ZWSP + "-45-6789") == ("regex:123" + ZWSP + "-45-6789",)


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
