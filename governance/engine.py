"""The policy engine. Pure: specs and text in, explainable decisions out. No ORM, no I/O.

Every decision names the policy, its version and what matched. Anything that cannot be
evaluated raises PolicyEvaluationError, and the harness fails the run closed.

Texts are matched as a person reads them (core.text.normalize): keywords on the text's
key (confusables, fullwidth forms, invisible characters and stray combining marks undone, case
folded), regexes on the text as sent, on its NFKC form and on its key, on RE2
(core.patterns: linear time, whatever the pattern). A decision quotes the input as sent.

A set of policies is compiled once into a PolicyIndex: policies sorted by type and priority,
their soundness checked, and every keyword in one automaton (governance.keyword_index). An
input is then normalised and scanned once, whatever the number of policies; only the policies
whose keywords occur, those with a regex and those that match every text are looked at. The
module-level functions take a list of specs or an index, and answer exactly alike.
"""

import hashlib
import json
from dataclasses import asdict, dataclass, field
from collections import OrderedDict

from governance.keyword_index import KeywordIndex, occurs
from core.patterns import PatternError, compile_pattern, pattern_problem
from core.text import Normalized, normalize

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
    # Tool approval: distinct approvers needed (one denial denies), and where an undecided
    # request goes after how long (runs.approvals). A snapshot frozen before these existed reads
    # the defaults: one approver, no escalation.
    quorum: int = 1
    escalate_to_role: str | None = None
    escalate_after_seconds: int | None = None
    # Why the version in force was activated without a passing golden set (governance.drafts).
    emergency: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> "PolicySpec":
        values = dict(data)
        for key in ("agents", "keywords", "target_tools"):
            values[key] = tuple(values.get(key) or ())
        return cls(**values)

    def to_dict(self) -> dict:
        values = asdict(self)
        # Only when set: a policy activated through its gate freezes (and hashes) as before the marker.
        if not values["emergency"]:
            del values["emergency"]
        return values


@dataclass(frozen=True)
class Decision:
    policy_id: int
    policy_name: str
    version: int
    type: str
    matched: tuple[str, ...] = field(default_factory=tuple)
    # The words of the input that fired it, as sent (the keyword may have been written with
    # Cyrillic letters or zero-width spaces in it): what the person reviewing it should see.
    quoted: tuple[str, ...] = field(default_factory=tuple)

    def explain(self) -> dict:
        explained = {
            "policy_id": self.policy_id,
            "policy": self.policy_name,
            "version": self.version,
            "type": self.type,
            "matched": list(self.matched),
        }
        if self.quoted:
            explained["quoted"] = list(self.quoted)
        return explained


def snapshot_sha256(specs: list[PolicySpec]) -> str:
    body = json.dumps([s.to_dict() for s in specs], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def _compile(policy: str, pattern: str):
    try:
        return compile_pattern(pattern)
    except PatternError as exc:
        raise PolicyEvaluationError(policy, f"regex {pattern!r}: {exc}") from None


def validate(spec: PolicySpec, *, default_ttl_seconds: int | None = None) -> list[str]:
    """Problems that would make the policy fail closed at run time; empty when sound.

    `default_ttl_seconds`: the TTL a request gets when the policy names none (the writers pass
    the setting, so an escalation that could never happen before expiry is refused on save)."""
    problems = approval_routing_problems(spec, default_ttl_seconds=default_ttl_seconds)
    if spec.type not in TYPES:
        problems.append(f"unknown policy type {spec.type!r}")
    if spec.match_mode not in ("any", "all"):
        problems.append(f"match_mode must be 'any' or 'all', not {spec.match_mode!r}")
    if any(not isinstance(k, str) or not k.strip() for k in spec.keywords):
        problems.append("keywords must be non-empty strings")
    if spec.regex and (problem := pattern_problem(spec.regex)):
        problems.append(problem)
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


def approval_routing_problems(spec: PolicySpec, *, default_ttl_seconds: int | None = None) -> list[str]:
    """Quorum and escalation: at least one approver; a role and a delay together or neither; an
    escalation due before the request expires (one due after it would never happen)."""
    problems = []
    if not isinstance(spec.quorum, int) or spec.quorum < 1:
        problems.append("quorum must be at least 1")
    if bool(spec.escalate_to_role) != (spec.escalate_after_seconds is not None):
        problems.append("escalation needs both a role to escalate to and a delay, or neither")
    elif spec.escalate_to_role and spec.escalate_to_role == spec.approver_role:
        problems.append("escalate_to_role must differ from the approver role")
    ttl = spec.approval_ttl_seconds or default_ttl_seconds
    if spec.escalate_after_seconds is not None and ttl is not None and spec.escalate_after_seconds >= ttl:
        problems.append(f"escalate_after_seconds ({spec.escalate_after_seconds}) must be less than the request's "
                        f"TTL ({ttl} s): the request would expire before it escalates")
    return problems


def match_text(spec: PolicySpec, text: str) -> tuple[str, ...] | None:
    """What in `text` fires `spec`: matched keywords or the regex; None when it does not fire.

    A policy with neither keywords nor regex matches every text (formatters, tool rules).
    """
    normalized = normalize(text)
    found = {k: span for k in spec.keywords if (span := occurs(normalized, k)) is not None}
    fired = _match(spec, normalized, found)
    return None if fired is None else fired[0]


# The views a regex is tried on, in order: as sent (a pattern that always matched still does),
# NFKC without invisible characters, and as an ASCII reader reads it (lookalikes of what the
# pattern spells). Not the key: its skeleton spells "from" as "frorn".
_REGEX_VIEWS = ("original", "plain", "read")


def _match(spec: PolicySpec, text: Normalized, found: dict) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(matched, quoted) for `spec` on `text`, given the keywords known to occur in it (as
    whole words, with their spans in its key); None when it does not fire."""
    if spec.match_mode not in ("any", "all"):
        raise PolicyEvaluationError(spec.name, f"unknown match mode {spec.match_mode!r}")
    hits = tuple(k for k in spec.keywords if k in found)
    if spec.keywords:
        wanted = len(spec.keywords) if spec.match_mode == "all" else 1
        if len(hits) >= wanted:
            return hits, tuple(dict.fromkeys(text.quote("key", *found[k]) for k in hits))
    if spec.regex:
        pattern = _compile(spec.name, spec.regex)
        for view in _REGEX_VIEWS:
            matched = pattern.search(text.view(view))
            if matched:
                quoted = text.quote(view, *matched.span())
                return (f"regex:{quoted}",), (quoted,)
    if not spec.keywords and not spec.regex:
        return (), ()
    return None


def applies_to_agent(spec: PolicySpec, agent: str) -> bool:
    return not spec.agents or agent in spec.agents


def targets_tool(spec: PolicySpec, tool: str) -> bool:
    return ALL_TOOLS in spec.target_tools or tool in spec.target_tools


def _priority(spec: PolicySpec) -> tuple[int, int]:
    return spec.priority, spec.id


class PolicyIndex:
    """A list of policies compiled for evaluation. Build it once per snapshot; it is read-only.

    Fail-closed rules are those of evaluating the list one policy at a time: a policy of unknown
    type anywhere makes every evaluation fail; an unsound enabled policy fails any evaluation it
    takes part in, named in priority order.
    """

    def __init__(self, specs):
        self.specs = tuple(specs)
        self._unknown = next((s for s in self.specs if s.type not in TYPES), None)
        self._problems: dict[int, str] = {}  # id(spec) -> why it cannot be evaluated
        self._unsound: list[PolicySpec] = []  # enabled and unsound, in list order (check_all)
        self._ordered: dict[str, list[PolicySpec]] = {t: [] for t in TYPES}
        for spec in self.specs:
            if not spec.enabled:
                continue
            problems = validate(spec)
            if problems:
                self._problems[id(spec)] = "; ".join(problems)
                self._unsound.append(spec)
            if spec.type in self._ordered:
                self._ordered[spec.type].append(spec)
        # Per type, positions in priority order of: unsound policies; policies looked at for every
        # text (a regex, or nothing to match on); and, per keyword, the policies that name it.
        self._unsound_at: dict[str, list[int]] = {}
        self._always_at: dict[str, list[int]] = {}
        self._owners: dict[str, dict[str, list[int]]] = {}
        keywords = []
        for type_, ordered in self._ordered.items():
            ordered.sort(key=_priority)
            unsound, always, owners = [], [], {}
            for position, spec in enumerate(ordered):
                if id(spec) in self._problems:
                    unsound.append(position)
                elif spec.regex or not spec.keywords:
                    always.append(position)
                else:
                    for keyword in dict.fromkeys(spec.keywords):
                        owners.setdefault(keyword, []).append(position)
                if id(spec) not in self._problems:
                    keywords.extend(spec.keywords)
            self._unsound_at[type_], self._always_at[type_], self._owners[type_] = unsound, always, owners
        self._keywords = KeywordIndex(keywords)
        self._last_found: tuple[str, Normalized, dict] | None = None

    def _found(self, text: str) -> tuple[Normalized, dict]:
        """The text's views and the keywords found in it; a run asks about its input several
        times (guard, playbooks, formatter, each tool call), which is normalised and scanned once."""
        last = self._last_found
        if last is not None and last[0] == text:
            return last[1], last[2]
        normalized = normalize(text)
        found = self._keywords.found(normalized)
        self._last_found = (text, normalized, found)
        return normalized, found

    def _decide(self, spec: PolicySpec, text: str, *, first: tuple[str, ...] = ()) -> Decision | None:
        if not spec.keywords and not spec.regex:  # fires on every text: nothing to read
            return Decision(spec.id, spec.name, spec.version, spec.type, first)
        normalized, found = self._found(text)
        fired = _match(spec, normalized, found)
        if fired is None:
            return None
        matched, quoted = fired
        return Decision(spec.id, spec.name, spec.version, spec.type, (*first, *matched), quoted)

    def _checked(self, spec: PolicySpec) -> PolicySpec:
        problem = self._problems.get(id(spec))
        if problem:
            raise PolicyEvaluationError(spec.name, problem)
        return spec

    def _active(self, type_: str) -> list[PolicySpec]:
        if self._unknown is not None:
            raise PolicyEvaluationError(self._unknown.name, f"unknown policy type {self._unknown.type!r}")
        return self._ordered[type_]

    def check_all(self, *, agent: str) -> None:
        for spec in self._unsound:
            if applies_to_agent(spec, agent):
                self._checked(spec)

    def input_decisions(self, *, agent: str, text: str, type_: str) -> list[tuple[PolicySpec, Decision]]:
        ordered = self._active(type_)
        for position in self._unsound_at[type_]:
            if applies_to_agent(ordered[position], agent):
                self._checked(ordered[position])
        positions = set(self._always_at[type_])
        owners = self._owners[type_]
        if owners:
            for keyword in self._found(text)[1]:
                positions.update(owners.get(keyword, ()))
        fired = []
        for position in sorted(positions):
            spec = ordered[position]
            if applies_to_agent(spec, agent) and (decision := self._decide(spec, text)) is not None:
                fired.append((spec, decision))
        return fired

    def tool_guides(self, *, agent: str, tool: str) -> list[tuple[PolicySpec, Decision]]:
        return [
            (spec, Decision(spec.id, spec.name, spec.version, spec.type, (tool,)))
            for spec in self._active("tool_guide")
            if applies_to_agent(spec, agent) and targets_tool(self._checked(spec), tool)
        ]

    def tool_approval(self, *, agent: str, tool: str, text: str) -> tuple[PolicySpec, Decision] | None:
        for spec in self._active("tool_approval"):
            if not applies_to_agent(spec, agent) or not targets_tool(self._checked(spec), tool):
                continue
            decision = self._decide(spec, text, first=(tool,))
            if decision is not None:
                return spec, decision
        return None


_COMPILED: OrderedDict[tuple[int, ...], PolicyIndex] = OrderedDict()
_COMPILED_MAX = 16


def compile_policies(specs) -> PolicyIndex:
    """The index of `specs` (a list of PolicySpec, or an index already).

    Recently compiled lists are kept, keyed by the identity of their specs: the index holds the
    specs themselves, so no other object can take one of those identities while it is kept, and
    specs are frozen.
    """
    if isinstance(specs, PolicyIndex):
        return specs
    key = tuple(map(id, specs))
    index = _COMPILED.get(key)
    if index is None:
        index = PolicyIndex(specs)
        _COMPILED[key] = index
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    return index


def input_decisions(specs, *, agent: str, text: str, type_: str) -> list[tuple[PolicySpec, Decision]]:
    """Policies of one input-matched type that fire on `text`, in priority order."""
    return compile_policies(specs).input_decisions(agent=agent, text=text, type_=type_)


def intent_guard(specs, *, agent: str, text: str) -> tuple[PolicySpec, Decision] | None:
    fired = input_decisions(specs, agent=agent, text=text, type_="intent_guard")
    return fired[0] if fired else None


def tool_guides(specs, *, agent: str, tool: str) -> list[tuple[PolicySpec, Decision]]:
    return compile_policies(specs).tool_guides(agent=agent, tool=tool)


def tool_approval(specs, *, agent: str, tool: str, text: str) -> tuple[PolicySpec, Decision] | None:
    """The first approval policy that parks a call of `tool`, given the run's input text."""
    return compile_policies(specs).tool_approval(agent=agent, tool=tool, text=text)


def check_all(specs, *, agent: str) -> None:
    """Fail closed up front: every enabled policy that could apply to this agent must be sound."""
    compile_policies(specs).check_all(agent=agent)


def format_output(spec: PolicySpec, *, answer: str) -> str:
    # str.replace, not str.format: the answer and the template may hold braces of their own.
    return spec.content.replace("{answer}", answer)
