"""What the scripted backend calls next: one request read once, and arguments by property name.

Records are of the kinds the tools take ids of: a property `account_id` makes "account" a kind;
the tool on offer that says the kind in its name and takes a `query` resolves a name to a record,
one that says it and takes nothing lists them all. A property takes, by its name: `<kind>_id` a
record's id, a resolver's `query` a record's name, another `query` (`q`, `topic`, `search`) a
topic, `to` an address, `name` a name; a wording module may read others (FILLS: the calculator's
`expression`, an email's `subject` and `body`). A fill is ready (values, several to fan out
over), wait (first make these lookups) or skip (and why); a call is as ready as its least ready
argument.

The steps are the tools the prompt's playbook and skill sections name, else those whose name words
the request says. Orders ("call `x` with {...}", or a wording module's phrase such as "delete the
account Initech") in the user's messages or in successful results come first, even for tools not on
offer (taken to want the id of each kind their name says); an order without arguments is filled as
a step is, from its sentence or from the target its phrase named. A turn makes every call whose
arguments are known and the lookups the others wait for, never a call already made.
"""

import json
import re
from dataclasses import dataclass, field
from itertools import product

from agents.backends import scripted_text as text
from agents.backends.base import ModelRequest, tool_result_payload
from agents.prompt_format import LOAD_SKILL

# Tools whose name starts with one of these change something: they are inferred only when the
# request says the verb, and never fanned out over every record.
SIDE_EFFECT_VERBS = frozenset("send delete remove create update write post cancel close drop wipe".split())
# Properties that take a search topic (but a resolver's `query` takes a record's name), and an address.
TOPIC_PROPERTIES, ADDRESS_PROPERTIES = ("query", "q", "topic", "search"), ("to", "email", "recipient", "address")


def dumps(value) -> str:  # keys sorted, so the same arguments always read the same
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def is_side_effect(tool: str) -> bool:
    return tool.split("_", 1)[0].lower() in SIDE_EFFECT_VERBS


def properties(tool: dict | None) -> dict:
    return ((tool or {}).get("input_schema") or {}).get("properties") or {}


@dataclass(frozen=True)
class PastCall:
    id: str
    name: str
    arguments: dict
    envelope: dict | None  # None while the harness has not answered it (or never will)

    @property
    def ok(self) -> bool:
        return bool(self.envelope and self.envelope.get("ok"))

    @property
    def data(self):
        return self.envelope.get("data") if self.ok else None


def _json(raw, default):
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return default


def past_calls(messages: list[dict]) -> list[PastCall]:
    """The assistant's tool calls in order, each with the envelope of its result if it has one.
    A result that is not an envelope ({"ok": bool, ...}) counts as plain data that succeeded."""
    calls, results = [], {}
    for message in messages:
        if message.get("role") == "assistant":
            calls += [(str(call.get("id", "")), call.get("name", ""), _json(call.get("arguments"), {}))
                      for call in message.get("tool_calls") or []]
        elif message.get("role") == "tool":
            content = tool_result_payload(message.get("content"))
            value = _json(content, content)
            enveloped = isinstance(value, dict) and isinstance(value.get("ok"), bool)
            results[str(message.get("tool_call_id", ""))] = value if enveloped else {"ok": True, "data": value}
    return [PastCall(i, name, args if isinstance(args, dict) else {}, results.get(i)) for i, name, args in calls]


def rows(data) -> list[dict]:
    """The records in a result: a list of dicts, or one dict."""
    return [row for row in (data if isinstance(data, list) else [data]) if isinstance(row, dict)]


def id_of(row: dict) -> str | None:
    """A record's id: its "id", else its first "<kind>_id", written as ids are (A-100)."""
    return next((row[key] for key in ["id", *(k for k in row if k.endswith("_id"))]
                 if isinstance(row.get(key), str) and re.fullmatch(text.ID, row[key])), None)


@dataclass(frozen=True)
class Scope:
    """What the words that say what to do name: the request's, an order's sentence, or an order's target."""

    text: str
    entities: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    fan_out: bool = False  # with no record named, use every record the lister returned


def scope_of(words: str, fan_out: bool = False) -> Scope:
    return Scope(words, tuple(text.entities(words)), tuple(text.distinct(text.ID, words)),
                 tuple(text.distinct(text.ADDRESS, words)), fan_out)


def target_scope(order: text.Order) -> Scope:
    """What a wording phrase's order is about: the one address, record id or record name it named."""
    target = order.target
    named = "emails" if re.fullmatch(text.ADDRESS, target) else "ids" if re.fullmatch(text.ID, target) else "entities"
    return Scope(order.text, **{named: (target,)})


@dataclass
class Fill:
    status: str  # "ready" | "wait" | "skip"
    values: list = field(default_factory=list)  # ready: argument dicts or single values
    needs: list = field(default_factory=list)  # wait: (tool, arguments) lookups to make first
    reason: str = ""  # skip: why


def skip(reason: str) -> Fill:
    return Fill("skip", reason=reason)


def waiting(fills: list[Fill]) -> Fill | None:
    """If any of these waits, one wait for all the lookups they need (none while a lookup is unanswered)."""
    if any(fill.status == "wait" for fill in fills):
        return Fill("wait", needs=[need for fill in fills for need in fill.needs])
    return None


def inferred_steps(request: str, tools: list[dict]) -> list[str]:
    """Tools whose name words the request says (a tool that changes something needs its verb said),
    the most specific of look-alikes; a tool taking a property a wording module reads (ASKED) when it says so."""
    said, names, synonyms = text.words(request), [tool["name"] for tool in tools], text.wording().synonyms
    where: dict[str, int] = {}  # stem (or the tools' word it means) -> first position in the request
    for position, word in enumerate(said):
        for form in (text.stem(word), synonyms.get(text.stem(word))):
            where.setdefault(form, position)
    matched: dict[str, int] = {}  # tool -> where in the request it was first named
    for tool in tools:
        name, parts = tool["name"], text.tool_words(tool["name"])
        hits = [where[part] for part in parts if part in where]
        if asked := next((wants for prop, wants in text.wording().asked.items() if prop in properties(tool)), None):
            hits = [0] if asked(request) else []
        elif 2 * len(hits) < len(parts) or (is_side_effect(name) and parts[0] not in where):
            hits = []
        if hits:
            matched[name] = min(hits)

    stems = {name: frozenset(text.tool_words(name)) for name in matched}

    def rank(name):  # more words, then more said exactly as the tool spells them, then offered first
        return len(stems[name]), sum(part in said for part in name.lower().split("_")), -names.index(name)

    # "delete the account" says delete_account more than get_account, "list all accounts" list_accounts.
    kept = [name for name in matched if not any(stems[o] >= stems[name] and rank(o) > rank(name) for o in matched)]
    return sorted(kept, key=lambda name: (matched[name], names.index(name)))


class Plan:
    """Everything one request says, read once, and the calls it leads to."""

    def __init__(self, request: ModelRequest):
        self.tools = {tool["name"]: tool for tool in request.tools}
        self.history = past_calls(request.messages)
        said = [_text(m.get("content")) for m in request.messages if m.get("role") == "user"] or [""]
        own = text.find_orders(said[0], self.tools)
        # Results are read only when they succeeded: an error message is the harness talking. A
        # loaded skill is a procedure the harness handed over; its steps arrive in the prompt.
        results = [s for call in self.history if call.ok and call.name != LOAD_SKILL for s in _strings(call.data)]
        self.orders = own + [order for words in said[1:] + results for order in text.find_orders(words, self.tools)]
        subject = text.strip_orders(said[0], own)
        self.steps = text.planned_steps(request.system, self.tools) or inferred_steps(subject, request.tools)
        id_properties = [(prop[:-3], spec) for tool in request.tools for prop, spec in properties(tool).items()
                         if prop.endswith("_id")]
        self.kinds = list(dict.fromkeys(kind for kind, _ in id_properties))
        # An id a request names counts for a kind only if it fits the pattern its schema gives (A-100, not T-2).
        self.patterns = {kind: spec["pattern"] for kind, spec in id_properties
                         if isinstance(spec, dict) and isinstance(spec.get("pattern"), str)}
        self.resolvers = {kind: self._tool_for(kind, lambda props: "query" in props) for kind in self.kinds}
        self.listers = {kind: self._tool_for(kind, lambda props: not props) for kind in self.kinds}
        self.names = {id_of(row): row["name"] for call in reversed(self.history) for row in rows(call.data)
                      if id_of(row) and isinstance(row.get("name"), str) and row["name"]}  # the first name said wins
        self.scope = scope_of(subject, fan_out=any(step in self.listers.values() for step in self.steps))
        self.skipped: list[str] = []

    def _tool_for(self, kind: str, takes) -> str | None:
        return next((name for name, tool in self.tools.items()
                     if takes(properties(tool)) and text.stem(kind) in text.tool_words(name)), None)

    def ids(self, scope: Scope, kind: str) -> list[str]:
        return [i for i in scope.ids if re.fullmatch(self.patterns.get(kind, ".*"), i)]

    def lookups(self) -> set[str]:
        return {tool for tool in (*self.resolvers.values(), *self.listers.values()) if tool}

    def made(self, name: str | None) -> list[PastCall]:
        return [call for call in self.history if call.name == name]

    def next_calls(self) -> list[tuple[str, dict]]:
        """Every call whose arguments are known now, and the lookups the others wait for; never a
        call already made. Orders first."""
        seen = {(call.name, dumps(call.arguments)) for call in self.history}
        fills = [(order.tool, self.fill_order(order)) for order in self.orders]
        batch = []
        for tool, fill in fills + [(step, self.fill_step(step, self.scope)) for step in self.steps]:
            self.skipped += [fill.reason] if fill.status == "skip" else []
            for name, arguments in ([(tool, a) for a in fill.values] if fill.status == "ready" else fill.needs):
                if (name, dumps(arguments)) not in seen:
                    seen.add((name, dumps(arguments)))
                    batch.append((name, arguments))
        return batch

    # --- Records ------------------------------------------------------------------------------

    def resolve(self, name: str, kind: str) -> Fill:
        """The record called `name` as the kind's resolver found it, or that lookup, to make first."""
        resolver = self.resolvers[kind]
        if not resolver:
            return skip(f"no way to look up the {kind} {name!r}")
        asked = [call for call in self.made(resolver) if str(call.arguments.get("query", "")).casefold() == name.casefold()]
        if not asked:
            return Fill("wait", needs=[(resolver, {"query": name})])
        found = [{**row, "id": id_of(row)} for row in rows(asked[0].data) if id_of(row)]
        if found:
            return Fill("ready", found[:1])
        return Fill("wait") if asked[0].envelope is None else skip(f"no {kind} matches {name!r}")

    def record_ids(self, scope: Scope, tool: str, kind: str) -> Fill:
        """The ids of the records a call is about: named by id or by name, or, fanning out, every one listed."""
        if self.ids(scope, kind) or scope.entities:
            fills = [self.resolve(name, kind) for name in scope.entities]
            if wait := waiting(fills):
                return wait
            found = self.ids(scope, kind) + [fill.values[0]["id"] for fill in fills if fill.status == "ready"]
            return Fill("ready", found) if found else skip("; ".join(fill.reason for fill in fills))
        lister = self.listers[kind]
        if not (scope.fan_out and lister and not is_side_effect(tool)):
            return skip(f"the request names no {kind}")
        listed = [call for call in self.made(lister) if call.envelope is not None]
        return Fill("ready", [i for i in map(id_of, rows(listed[0].data)) if i]) if listed else Fill(
            "wait", needs=[(lister, {})])

    # --- Arguments ----------------------------------------------------------------------------

    def value_for(self, tool: str, prop: str, scope: Scope) -> Fill:
        key = prop.lower()
        if key in text.wording().fills and (filled := text.wording().fills[key](self, tool, scope)) is not None:
            return filled
        if key.endswith("_id") and key[:-3] in self.kinds:
            return self.record_ids(scope, tool, key[:-3])
        if key == "query" and (kind := next((k for k, resolver in self.resolvers.items() if resolver == tool), None)):
            names = list(scope.entities) or self.ids(scope, kind)
            return Fill("ready", names) if names else skip(f"the request names no {kind}")
        if key in TOPIC_PROPERTIES:
            return Fill("ready", [about]) if (about := text.topic(scope.text)) else skip("nothing to search for")
        if key in ADDRESS_PROPERTIES:
            return Fill("ready", list(scope.emails[:1])) if scope.emails else skip("no email address given")
        return Fill("ready", list(scope.entities[:1])) if key == "name" and scope.entities else skip(
            f"nothing to use for {prop}")

    def schema(self, tool: str) -> dict:
        """A tool's input schema; one not on offer (an order may name it) takes the id of each kind its name says."""
        if tool in self.tools:
            return self.tools[tool].get("input_schema") or {}
        return {"properties": {f"{kind}_id": {} for kind in self.kinds if text.stem(kind) in text.tool_words(tool)}}

    def fill_step(self, tool: str, scope: Scope) -> Fill:
        """Argument sets for one tool: every combination of the values found (fan-out)."""
        schema = self.schema(tool)
        fills = {prop: self.value_for(tool, prop, scope) for prop in schema.get("properties") or {}}
        required = schema.get("required") or []
        if missing := [fill for prop, fill in fills.items() if fill.status == "skip" and prop in required]:
            return skip(f"{tool}: {missing[0].reason}")
        if wait := waiting(list(fills.values())):
            return wait
        chosen = {prop: list(dict.fromkeys(fill.values)) for prop, fill in fills.items() if fill.status == "ready"}
        return Fill("ready", [dict(zip(chosen, combo, strict=True)) for combo in product(*chosen.values())])

    def fill_order(self, order: text.Order) -> Fill:
        """An order's call: its arguments as given, else filled from what its target or sentence names."""
        if order.arguments is not None:
            return Fill("ready", [order.arguments])
        if order.target is None:
            return self.fill_step(order.tool, scope_of(order.text))
        if not self.schema(order.tool).get("properties"):  # not on offer, and of no kind of record known
            return skip(f"no way to look up {order.target!r}")
        return self.fill_step(order.tool, target_scope(order))


def _text(content) -> str:
    if isinstance(content, list):  # content parts, as some clients send them
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else "" if content is None else str(content)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [string for item in items for string in _strings(item)]
