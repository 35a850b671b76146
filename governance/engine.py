"""The policy engine. Pure: specs and text in, explainable decisions out. No ORM, no I/O.

Every decision names the policy, its version and what matched. Anything that cannot be
evaluated raises PolicyEvaluationError, and the harness fails the run closed.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

TYPES = ("intent_guard", "playbook", "tool_guide", "tool_approval", "output_formatter")
ALL_TOOLS = "*"


class PolicyEvaluationError(Exception):
    def __init__(self, policy: str, reason: str):
        super().__init__(f"policy {policy!r} cannot be evaluated: {reason}")
        self.policy = policy
        self.reason = reason


@dataclass(frozen=True)
class PolicySpec:
    id: int
    name: str
    type: str
    version: int
    priority: int = 100
    enabled: bool = True
    agents: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    match_mode: str = "any"
    regex: str = ""
    target_tools: tuple[str, ...] = ()
    content: str = ""
    response: str = ""
    approver_role: str | None = None
    approval_ttl_seconds: int | None = None

    @classmethod
    def from_dict(cls, data: dict) -> "PolicySpec":
        values = dict(data)
        for key in ("agents", "keywords", "target_tools"):
            values[key] = tuple(values.get(key) or ())
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    policy_id: int
    policy_name: str
    version: int
    type: str
    matched: tuple[str, ...] = field(default_factory=tuple)

    def explain(self) -> dict:
        return {
            "policy_id": self.policy_id,
            "policy": self.policy_name,
            "version": self.version,
            "type": self.type,
            "matched": list(self.matched),
        }


def snapshot_sha256(specs: list[PolicySpec]) -> str:
    body = json.dumps([s.to_dict() for s in specs], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


@lru_cache(maxsize=1024)
def _word_pattern(phrase: str) -> re.Pattern:
    # Whole words only: "drop" must not match "dropdown". Inner whitespace matches any run.
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


@lru_cache(maxsize=1024)
def _compile(policy: str, pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise PolicyEvaluationError(policy, f"invalid regex {pattern!r}: {exc}") from None


def validate(spec: PolicySpec) -> list[str]:
    """Problems that would make the policy fail closed at run time; empty when sound."""
    problems = []
    if spec.type not in TYPES:
        problems.append(f"unknown policy type {spec.type!r}")
    if spec.match_mode not in ("any", "all"):
        problems.append(f"match_mode must be 'any' or 'all', not {spec.match_mode!r}")
    if any(not isinstance(k, str) or not k.strip() for k in spec.keywords):
        problems.append("keywords must be non-empty strings")
    if spec.regex:
        try:
            re.compile(spec.regex)
        except re.error as exc:
            problems.append(f"invalid regex: {exc}")
    if spec.type in ("intent_guard", "playbook") and not (spec.keywords or spec.regex):
        problems.append(f"a {spec.type} needs keywords or a regex to match on")
    if spec.type in ("tool_guide", "tool_approval") and not spec.target_tools:
        problems.append(f"a {spec.type} needs target tools ('*' for all)")
    if spec.type == "tool_approval" and not spec.approver_role:
        problems.append("a tool approval needs an approver role")
    if spec.type == "intent_guard" and not spec.response.strip():
        problems.append("an intent guard needs the response shown instead of the agent's answer")
    if spec.type in ("playbook", "tool_guide") and not spec.content.strip():
        problems.append(f"a {spec.type} needs content")
    if spec.type == "output_formatter" and "{answer}" not in spec.content:
        problems.append("an output formatter's content must contain {answer}")
    return problems


def match_text(spec: PolicySpec, text: str) -> tuple[str, ...] | None:
    """What in `text` fires `spec`: matched keywords or the regex; None when it does not fire.

    A policy with neither keywords nor regex matches every text (formatters, tool rules).
    """
    if spec.match_mode not in ("any", "all"):
        raise PolicyEvaluationError(spec.name, f"unknown match mode {spec.match_mode!r}")
    hits = tuple(k for k in spec.keywords if _word_pattern(k).search(text))
    if spec.keywords:
        wanted = len(spec.keywords) if spec.match_mode == "all" else 1
        if len(hits) >= wanted:
            return hits
    if spec.regex:
        found = _compile(spec.name, spec.regex).search(text)
        if found:
            return (f"regex:{found.group(0)}",)
    if not spec.keywords and not spec.regex:
        return ()
    return None


def applies_to_agent(spec: PolicySpec, agent: str) -> bool:
    return not spec.agents or agent in spec.agents


def targets_tool(spec: PolicySpec, tool: str) -> bool:
    return ALL_TOOLS in spec.target_tools or tool in spec.target_tools


def _active(specs: list[PolicySpec], agent: str, type_: str) -> list[PolicySpec]:
    found = []
    for spec in specs:
        if spec.type not in TYPES:
            raise PolicyEvaluationError(spec.name, f"unknown policy type {spec.type!r}")
        if spec.enabled and spec.type == type_ and applies_to_agent(spec, agent):
            found.append(spec)
    return sorted(found, key=lambda s: (s.priority, s.id))


def _fire(spec: PolicySpec, text: str) -> Decision | None:
    matched = match_text(spec, text)
    if matched is None:
        return None
    return Decision(spec.id, spec.name, spec.version, spec.type, matched)


def _checked(spec: PolicySpec) -> PolicySpec:
    problems = validate(spec)
    if problems:
        raise PolicyEvaluationError(spec.name, "; ".join(problems))
    return spec


def input_decisions(specs: list[PolicySpec], *, agent: str, text: str, type_: str) -> list[tuple[PolicySpec, Decision]]:
    """Policies of one input-matched type that fire on `text`, in priority order."""
    fired = []
    for spec in _active(specs, agent, type_):
        decision = _fire(_checked(spec), text)
        if decision is not None:
            fired.append((spec, decision))
    return fired


def intent_guard(specs: list[PolicySpec], *, agent: str, text: str) -> tuple[PolicySpec, Decision] | None:
    fired = input_decisions(specs, agent=agent, text=text, type_="intent_guard")
    return fired[0] if fired else None


def tool_guides(specs: list[PolicySpec], *, agent: str, tool: str) -> list[tuple[PolicySpec, Decision]]:
    return [
        (spec, Decision(spec.id, spec.name, spec.version, spec.type, (tool,)))
        for spec in _active(specs, agent, "tool_guide")
        if targets_tool(_checked(spec), tool)
    ]


def tool_approval(specs: list[PolicySpec], *, agent: str, tool: str, text: str) -> tuple[PolicySpec, Decision] | None:
    """The first approval policy that parks a call of `tool`, given the run's input text."""
    for spec in _active(specs, agent, "tool_approval"):
        if not targets_tool(_checked(spec), tool):
            continue
        matched = match_text(spec, text)
        if matched is not None:
            return spec, Decision(spec.id, spec.name, spec.version, spec.type, (tool, *matched))
    return None


def check_all(specs: list[PolicySpec], *, agent: str) -> None:
    """Fail closed up front: every enabled policy that could apply to this agent must be sound."""
    for spec in specs:
        if spec.enabled and applies_to_agent(spec, agent):
            _checked(spec)


def format_output(spec: PolicySpec, *, answer: str) -> str:
    # str.replace, not str.format: the answer and the template may hold braces of their own.
    return spec.content.replace("{answer}", answer)
