"""The policy engine's matching, pure: whole words, phrases, modes and regexes, on the text as a person
reads it (lookalike letters, invisible characters, combining marks)."""

import pytest

from governance import engine
from governance.engine import PolicyEvaluationError
from tests.governance.engine_specs import make


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
