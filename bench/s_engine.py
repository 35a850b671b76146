"""Scenario 5: one 2,000-character input against 10, 1,000 and 10,000 keyword policies.

What is timed is what a run does with its input at the start (engine.check_all, the intent
guard, the playbooks, the output formatters) on a compiled PolicyIndex: a run's policies are
frozen, so the index is built once per snapshot (its build time is reported too). Beside it,
the same decisions taken one policy at a time (engine.match_text over every active policy,
the engine's algorithm before the index), so the table shows what the index buys.
"""

import random
import time

from bench.common import median, record, rotations
from governance import engine
from governance.engine import PolicyIndex, PolicySpec

SIZES = (10, 1_000, 10_000)
WORDS = [f"{stem}{suffix}" for stem in ("acct", "churn", "renew", "seat", "pay", "risk", "ticket", "plan", "nps", "usage")
         for suffix in ("", "s", "ed", "ing", "er", "al", "ion", "ly", "ful", "ist")]


def policies(count: int, rng: random.Random) -> list[PolicySpec]:
    """Keyword policies: intent guards and playbooks with one to three keywords each (a third of them
    two-word phrases), any or all, a tenth scoped to another agent. Keywords are numbered words, so
    about as many policies fire on the input whatever their number."""
    specs = []
    for i in range(count):
        type_ = "intent_guard" if i % 4 == 0 else "playbook"
        keywords = tuple(
            f"{rng.choice(WORDS)}{i}" + (f" {rng.choice(WORDS)}" if rng.random() < 0.33 else "")
            for _ in range(rng.randint(1, 3)))
        specs.append(PolicySpec(
            id=i + 1, name=f"p{i}", type=type_, version=1, priority=rng.randrange(100), keywords=keywords,
            match_mode=rng.choice(("any", "all")), agents=("other",) if i % 10 == 9 else (),
            response="no" if type_ == "intent_guard" else "", content="1. do it" if type_ == "playbook" else ""))
    return specs


def input_text(rng: random.Random, specs: list[PolicySpec]) -> str:
    """2,000 characters of the policies' vocabulary, numbered like their keywords, with the keywords
    of three policies planted in it."""
    words = [k for spec in rng.sample(specs, min(3, len(specs))) for k in spec.keywords]
    while sum(len(w) + 1 for w in words) < 2_100:
        word = rng.choice(WORDS)
        words.append(f"{word}{rng.randrange(len(specs))}" if rng.random() < 0.3 else word)
    rng.shuffle(words)
    return " ".join(words)[:2_000]


def evaluate(specs, text: str) -> int:
    engine.check_all(specs, agent="bench")
    fired = 0
    for type_ in ("intent_guard", "playbook", "output_formatter"):
        fired += len(engine.input_decisions(specs, agent="bench", text=text, type_=type_))
    return fired


def one_at_a_time(specs: list[PolicySpec], text: str) -> int:
    for spec in specs:
        if spec.enabled and engine.applies_to_agent(spec, "bench") and engine.validate(spec):
            raise AssertionError(spec)
    fired = 0
    for type_ in ("intent_guard", "playbook", "output_formatter"):
        active = sorted((s for s in specs if s.enabled and s.type == type_ and engine.applies_to_agent(s, "bench")),
                        key=lambda s: (s.priority, s.id))
        fired += sum(1 for s in active if engine.match_text(s, text) is not None)
    return fired


def _per_call_us(fn, budget_s: float) -> float:
    fn()
    calls, started = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - started
        if elapsed >= budget_s:
            return elapsed / calls * 1e6


def run(*, reps: int, budget_s: float = 0.5, sizes=SIZES) -> list[dict]:
    rng = random.Random(8)
    records = []
    cases = {}
    for count in sizes:
        specs = policies(count, rng)
        texts = [input_text(rng, specs) for _ in range(16)]  # a new input each call: nothing cached
        text = texts[0]
        started = time.perf_counter()
        index = PolicyIndex(specs)
        build_ms = (time.perf_counter() - started) * 1000
        assert evaluate(index, text) == one_at_a_time(specs, text)  # the same decisions, counted
        cases[count] = (specs, texts, index)
        records.append(record("engine", f"index build, {count} policies", 0, "build_ms", build_ms, "ms", policies=count))
    variants = [f"index, {count}" for count in sizes] + [f"one at a time, {count}" for count in sizes]
    for rep, order in rotations(variants, reps):
        for name in order:
            how, count = name.split(", ")
            specs, texts, index = cases[int(count)]
            turn = iter(range(1 << 62))
            fn = ((lambda: evaluate(index, texts[next(turn) % 16])) if how == "index"
                  else (lambda: one_at_a_time(specs, texts[next(turn) % 16])))
            records.append(record("engine", name, rep, "us_per_input", _per_call_us(fn, budget_s), "µs",
                                  policies=int(count)))
    return records


def summary(records: list[dict]) -> dict:
    by = {}
    for r in records:
        if r["metric"] == "us_per_input":
            by.setdefault(r["variant"], []).append(r["value"])
    return {name: median(values) for name, values in by.items()}
