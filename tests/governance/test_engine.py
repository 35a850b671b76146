"""The policy engine's decisions, pure (no database, no settings): which policies fire for an agent and in
what order, for tools and for each of the five types, how a decision explains itself, the snapshot hash
and output formatting. Matching is in test_engine_matching.py, soundness in test_engine_soundness.py."""

import json

from governance import engine
from governance.engine import PolicySpec
from tests.governance.engine_specs import make


def guard_names(specs, text, agent="a"):
    return [spec.name for spec, _ in engine.input_decisions(specs, agent=agent, text=text, type_="intent_guard")]


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


# Formatting


def test_format_output_substitutes_an_answer_that_holds_braces():
    spec = make("output_formatter", content="{{literal}} {0} Summary:\n{answer}\nEnd {x}")
    answer = 'JSON: {"arr": 1200} and {answer} and {0}'
    assert engine.format_output(spec, answer=answer) == (
        '{{literal}} {0} Summary:\nJSON: {"arr": 1200} and {answer} and {0}\nEnd {x}'
    )


def test_format_output_fills_every_placeholder():
    assert engine.format_output(make("output_formatter", content="{answer} / {answer}"), answer="A") == "A / A"
