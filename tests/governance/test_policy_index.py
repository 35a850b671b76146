"""The compiled policy index answers exactly as evaluating each policy's own regex would. Pure."""

import random
import re

import pytest

from governance import engine
from governance.engine import PolicyEvaluationError, PolicyIndex
from governance import keyword_index
from governance.keyword_index import KeywordIndex
from core.text import fold, normalize
from tests.governance.engine_specs import make


def one_by_one(specs, *, agent, text, type_):
    """The oracle: every active policy of the type, in priority order, through match_text alone."""
    active = sorted((s for s in specs if s.enabled and s.type == type_ and engine.applies_to_agent(s, agent)),
                    key=lambda s: (s.priority, s.id))
    return [(s.id, engine.match_text(s, text)) for s in active if engine.match_text(s, text) is not None]


def answers(specs, *, agent, text, type_):
    return [(s.id, d.matched) for s, d in engine.compile_policies(specs).input_decisions(agent=agent, text=text, type_=type_)]


# The keyword index on its own


@pytest.mark.parametrize(
    ("keyword", "text", "occurs"),
    [
        ("drop", "please DROP it", True),
        ("drop", "open the dropdown", False),
        ("drop", "un_drop", False),  # the underscore is a word character, as to `\\w`
        ("at risk", "accounts at\n\t  risk today", True),
        ("at risk", "at risky prices", False),
        ("c++", "a C++ question", True),
        ("k", "a \u212a here", True),  # the Kelvin sign is a K
        ("sale", "a \u017fale", True),  # long s
        ("\u0131d", "ID card", True),  # dotless i reads as i
        ("\u0130stanbul", "istanbul", True),
        ("stra\u00dfe", "STRASSE", True),  # casefolded: sharp s is ss
        ("\u00e9t\u00e9", "UN \u00c9T\u00c9 CHAUD", True),
        ("\u00e9t\u00e9", "un ete chaud", True),  # accents are generic marks, dropped
        ("salary", "my \u0455\u0430l\u0430r\u0443?", True),  # Cyrillic
        ("salary", "my sal\u00adary", True),  # soft hyphen
        ("salary", "my salaryman", False),
        ("\u0437\u0430\u0440\u043f\u043b\u0430\u0442\u0430", "\u0417\u0410\u0420\u041f\u041b\u0410\u0422\u0410!", True),
    ],
)
def test_the_index_finds_a_keyword_exactly_when_the_one_keyword_search_does(keyword, text, occurs):
    assert (keyword_index.occurs(normalize(text), keyword) is not None) is occurs
    assert (keyword in KeywordIndex([keyword]).found(text)) is occurs


def test_a_keyword_found_quotes_the_words_as_sent():
    text = normalize("what is my \u0455\u0430l\u200b\u0430r\u0443, please")
    start, end = KeywordIndex(["salary"]).found(text)["salary"]
    assert text.quote("key", start, end) == "\u0455\u0430l\u200b\u0430r\u0443"


def test_folding_joins_whitespace_and_folds_case():
    assert fold("At \n\t RISK") == "at risk"
    assert fold("\u212a\u017f\u0130") == "ksi"


def test_the_index_uses_no_cpython_internals():
    source = open(keyword_index.__file__).read()
    assert "_sre" not in source and "_casefix" not in source


def test_the_index_reports_keywords_as_given_and_each_spelling_of_a_word():
    index = KeywordIndex(["Drop", "drop", "payroll", "at  risk"])
    assert set(index.found("DROP the payroll, accounts at risk")) == {"Drop", "drop", "payroll", "at  risk"}
    assert index.found("") == {}
    assert KeywordIndex([]).found("anything") == {}


WORDS = ["drop", "churn", "at", "risk", "salary", "pay", "payroll", "c++", "a.b", "ACME", "\u00e9t\u00e9", "k", "id"]
NOISE = [" ", "  ", "\n", "-", ".", "_", "x", "(", ")", "dropdown", "s", "\u212a", "\u0130D", "\u00c9T\u00c9", "\u0455\u0430l\u0430r\u0443", "sal\u00adary", "\uff50\uff41\uff59", "dr\u200bop"]


def random_text(rng):
    return "".join(rng.choice(WORDS + NOISE) + rng.choice([" ", "", "\n", ", "]) for _ in range(rng.randint(0, 40)))


def random_spec(rng, id_):
    type_ = rng.choice(["intent_guard", "playbook", "output_formatter"])
    keywords = [" ".join(rng.sample(WORDS, rng.choice([1, 1, 1, 2]))) for _ in range(rng.randint(0, 3))]
    regex = rng.choice(["", "", "", r"pay\w*", r"\bid\b"])
    if type_ != "output_formatter" and not keywords and not regex:
        keywords = [rng.choice(WORDS)]
    return make(type_, id=id_, keywords=keywords, regex=regex, match_mode=rng.choice(["any", "all"]),
                priority=rng.randint(0, 5), agents=rng.choice([[], [], ["a"], ["b"], ["a", "b"]]),
                enabled=rng.random() > 0.1)


@pytest.mark.parametrize("seed", range(20))
def test_random_policy_sets_give_the_same_decisions_as_one_policy_at_a_time(seed):
    rng = random.Random(seed)
    specs = [random_spec(rng, i) for i in range(1, rng.randint(2, 60))]
    for _ in range(25):
        text = random_text(rng)
        for agent in ("a", "b", "c"):
            for type_ in ("intent_guard", "playbook", "output_formatter"):
                assert answers(specs, agent=agent, text=text, type_=type_) == one_by_one(
                    specs, agent=agent, text=text, type_=type_)


def test_ten_thousand_policies_only_the_ones_whose_words_occur_fire_in_priority_order():
    specs = [make("playbook", id=i, keywords=[f"term{i}"], priority=10_000 - i) for i in range(1, 10_001)]
    specs.append(make("playbook", id=20_000, keywords=["term7", "term9"], match_mode="all", priority=0))
    index = PolicyIndex(specs)
    text = "look at term9 and TERM7 but not term77x or xterm3 " * 40
    fired = index.input_decisions(agent="a", text=text, type_="playbook")
    assert [(s.id, d.matched) for s, d in fired] == [(20_000, ("term7", "term9")), (9, ("term9",)), (7, ("term7",))]


def test_a_keyword_that_occurs_never_fires_a_policy_scoped_to_another_agent():
    specs = [make("intent_guard", keywords=["drop"], agents=["other"]), make("intent_guard", keywords=["churn"])]
    assert engine.intent_guard(PolicyIndex(specs), agent="a", text="drop it") is None


def test_a_regex_policy_is_looked_at_whatever_the_keywords_found():
    specs = [make("intent_guard", keywords=["drop"]), make("intent_guard", keywords=[], regex=r"ssn\s*\d+")]
    spec, decision = engine.intent_guard(PolicyIndex(specs), agent="a", text="my SSN 123")
    assert spec is specs[1] and decision.matched == ("regex:SSN 123",)


# Failing closed, through the index


def test_an_unsound_policy_fails_the_index_closed_even_when_nothing_in_the_text_matches_it():
    broken = make("playbook", name="broken", regex="([unclosed")
    index = PolicyIndex([make("playbook", keywords=["churn"]), broken])
    with pytest.raises(PolicyEvaluationError, match="broken"):
        index.input_decisions(agent="a", text="churn", type_="playbook")
    with pytest.raises(PolicyEvaluationError, match="broken"):
        index.check_all(agent="a")
    assert index.input_decisions(agent="a", text="churn", type_="intent_guard") == []


def test_an_unsound_policy_of_another_agent_or_disabled_does_not_stop_the_index():
    index = PolicyIndex([make("playbook", regex="([", agents=["b"]), make("playbook", regex="(", enabled=False),
                         make("playbook", keywords=["churn"])])
    index.check_all(agent="a")
    assert len(index.input_decisions(agent="a", text="churn", type_="playbook")) == 1


def test_an_unknown_type_anywhere_fails_every_evaluation_of_the_index():
    index = PolicyIndex([make("intent_guard"), make("mystery", enabled=False)])
    for evaluate in (lambda: index.input_decisions(agent="a", text="drop", type_="intent_guard"),
                     lambda: index.tool_guides(agent="a", tool="send_email"),
                     lambda: index.tool_approval(agent="a", tool="send_email", text="x")):
        with pytest.raises(PolicyEvaluationError, match="unknown policy type"):
            evaluate()


def test_a_tool_approval_earlier_in_priority_wins_before_a_later_unsound_one_is_reached():
    # As one policy at a time: evaluation stops at the first approval that parks the call.
    first = make("tool_approval", priority=1)
    broken = make("tool_approval", priority=9, approver_role=None)
    assert engine.tool_approval(PolicyIndex([broken, first]), agent="a", tool="send_email", text="x")[0] is first
    with pytest.raises(PolicyEvaluationError):
        engine.tool_approval(PolicyIndex([broken, first]), agent="a", tool="delete_account", text="x")


# Compiling once


def test_the_same_list_compiles_once_and_an_index_passes_through():
    specs = [make("intent_guard"), make("playbook")]
    index = engine.compile_policies(specs)
    assert engine.compile_policies(specs) is index
    assert engine.compile_policies(index) is index
    assert engine.compile_policies(list(specs)) is index  # the same spec objects
    assert engine.compile_policies([make("intent_guard")]) is not index


def test_an_index_decides_like_the_list_it_was_built_from_for_every_function():
    specs = [make(t) for t in engine.TYPES] + [make("tool_approval", keywords=["customer"], priority=1)]
    index = PolicyIndex(specs)
    text = "drop the churn note to the customer"
    assert engine.intent_guard(index, agent="a", text=text)[1] == engine.intent_guard(list(specs), agent="a", text=text)[1]
    assert [d for _, d in engine.tool_guides(index, agent="a", tool="send_email")] == [
        d for _, d in engine.tool_guides(specs, agent="a", tool="send_email")]
    assert engine.tool_approval(index, agent="a", tool="send_email", text=text)[1].matched == ("send_email", "customer")
    assert re.fullmatch(r"[0-9a-f]{64}", engine.snapshot_sha256(list(index.specs)))
