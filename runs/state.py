"""A run's state between steps: typed, versioned, and stored as JSON in Run.state.

The harness works on a RunState; the run's row keeps RunState.to_json(). Services, receipts,
provenance and the admin read that JSON by these key names, so a field's name is its key.

Layouts: this is layout 1. A stored dict without "version" is layout 1 as written before the
state carried its version; a checkpoint written before a key was added lacks that key, and
reads as the value the key must have had (_ADDED_LATER). Any other version is refused: a state
written by newer code is not guessed at.
"""

from dataclasses import dataclass, field, fields

from governance.taint import reason as taint_reason

VERSION = 1


class UnknownStateVersion(ValueError):
    """The stored state names a layout this code does not read."""


@dataclass
class RunState:
    phase: str = "start"  # start -> running -> done
    messages: list[dict] = field(default_factory=list)  # the conversation; messages[0] is the input
    pending: list[dict] = field(default_factory=list)  # tool calls of the last model turn not yet run
    rationale: str = ""  # the model's text beside those calls: the approver's card shows it
    turns: int = 0  # model calls made
    tool_calls: int = 0  # tool calls counted against the budget (load_skill is not)
    input_tokens: int = 0
    output_tokens: int = 0
    repairs: int = 0  # answers sent back for breaking the output contract
    malformed_turn: int | None = None  # the last model turn that could not be used
    playbooks: list[str] = field(default_factory=list)  # ids of the playbook policies added
    active_skills: list[str] = field(default_factory=list)
    fired: list[dict] = field(default_factory=list)  # policy decisions, explained, for the receipt
    model_calls: list[dict] = field(default_factory=list)  # one record per model call, for the receipt
    tool_log: list[dict] = field(default_factory=list)  # one entry per tool call, for the receipt
    tainted: bool = False
    taint_reasons: list[str] = field(default_factory=list)  # "origin: pattern, pattern", each once
    # Where untrusted text came in: call ids of untrusted tools' results, names of the tools whose
    # descriptions came from an untrusted source (runs.provenance reads both).
    untrusted_calls: list[str] = field(default_factory=list)
    untrusted_descriptions: list[str] = field(default_factory=list)
    # Times the run stopped for an approver: none means it has no approval requests to read.
    parks: int = 0
    provenance: dict[str, list] = field(default_factory=dict)  # call id -> its arguments' provenance, when parked
    # Budget extensions (runs.budget): what was granted per budget (stop reason -> amount, added to
    # the agent's limit), the ask waiting for the budget role, how many were asked; and the calls
    # each tool has run, for the agent's per-tool caps.
    extensions: dict[str, int] = field(default_factory=dict)
    budget_ask: dict | None = None
    budget_asks: int = 0
    tool_uses: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, input_text: str) -> "RunState":
        return cls(messages=[{"role": "user", "content": input_text}])

    @property
    def input_text(self) -> str:
        return self.messages[0]["content"]

    def taint(self, origin: str, patterns: list[str]) -> dict | None:
        """Mark the run tainted by what was found in `origin`; the trace event's data, or None."""
        if not patterns:
            return None
        self.tainted = True
        line = taint_reason(origin, patterns)
        if line not in self.taint_reasons:  # the same tool read ten times is one reason, not ten
            self.taint_reasons.append(line)
        return {"origin": origin, "patterns": patterns}

    def malformed(self, turn: int) -> bool:
        """Note that model turn `turn` could not be used. True when the turn before could not
        either: the model gets one turn to repair a reply, not two."""
        if self.malformed_turn == turn - 1:
            return True
        self.malformed_turn = turn
        return False

    def to_json(self) -> dict:
        """The stored form. It shares this state's lists; from_json copies them back out."""
        return {"version": VERSION} | {name: getattr(self, name) for name in _NAMES}

    @classmethod
    def from_json(cls, data: dict) -> "RunState":
        """A state of its own: the lists and dicts are copied, so changing it leaves `data` as it was.
        (Their items, messages and calls, are never changed in place, only added or removed.)"""
        version = data.get("version", 1)
        if version != VERSION:
            raise UnknownStateVersion(f"run state version {version!r} is not one this code reads (it reads {VERSION})")
        data = _ADDED_LATER | data
        if missing := [name for name in _NAMES if name not in data]:
            raise ValueError(f"run state lacks {', '.join(missing)}")
        values = {name: data[name] for name in _NAMES}
        for name in _CONTAINERS:
            values[name] = type(values[name])(values[name])
        return cls(**values)


_NAMES = tuple(f.name for f in fields(RunState))
_CONTAINERS = tuple(name for name, value in vars(RunState()).items() if isinstance(value, (list, dict)))
# Keys of layout 1 that a checkpoint written before they existed lacks, with the value they must
# have had. `parks` was not counted then: 1 says such a run may have approval requests, so they
# are read; the others were empty until something was put in them.
_ADDED_LATER = {
    "rationale": "", "malformed_turn": None, "untrusted_calls": [], "untrusted_descriptions": [],
    "parks": 1, "provenance": {}, "extensions": {}, "budget_ask": None, "budget_asks": 0, "tool_uses": {},
}
