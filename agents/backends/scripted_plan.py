"""Deciding what the scripted backend calls next, from the tools' schemas and the conversation so far.

Records are of the kinds the tools take ids of: a property `account_id` makes "account" a kind;
the tool on offer that says the kind in its name and takes a `query` resolves a name to a record
(the resolver), and the one that says it and takes nothing lists them all (the lister). Their
results tell which records exist. What a property takes goes by its name: `<kind>_id` a record's
id, a resolver's `query` a record's name, another `query` (or `q`, `topic`, `search`) a search
topic, `to` an address, `subject` and `body` a message's, `expression` arithmetic, `name` a name.
Filling an argument has three outcomes: ready (the values, possibly several to fan out over),
wait (first make these lookups) or skip (it cannot be filled, and why). A call is as ready as its
least ready argument.
"""

import json
import re
from dataclasses import dataclass, field
from itertools import product

from agents.backends import scripted_text as text
from agents.backends.base import tool_result_payload
from agents.backends.scripted_text import Order

# Tools whose name starts with one of these change something: they are inferred only when the
# request says the verb, and never fanned out over every record.
SIDE_EFFECT_VERBS = frozenset(
    {"send", "delete", "remove", "create", "update", "write", "post", "cancel", "close", "drop", "wipe"}
)
_NOT_JSON = object()


def call_key(name: str, arguments: dict) -> str:
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


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
        return json.loads(raw)
    except ValueError:
        return default


def past_calls(messages: list[dict]) -> list[PastCall]:
    """The assistant's tool calls in order, each with the envelope of its result if it has one.

    A result that is not an envelope ({"ok": bool, ...}) counts as plain data that succeeded."""
    calls, results = [], {}
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                raw = call.get("arguments")
                calls.append((str(call.get("id", "")), call.get("name", ""), _json(raw, {}) if isinstance(raw, str) else raw))
        elif message.get("role") == "tool":
            content = tool_result_payload(message.get("content"))
            value = _json(content, _NOT_JSON) if isinstance(content, str) else content
            results[str(message.get("tool_call_id", ""))] = value if isinstance(value, dict) and isinstance(
                value.get("ok"), bool) else {"ok": True, "data": content if value is _NOT_JSON else value}
    return [PastCall(id, name, arguments if isinstance(arguments, dict) else {}, results.get(id))
            for id, name, arguments in calls]


def rows(data) -> list[dict]:
    """The records in a result: a list of dicts, or one dict."""
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else (
        [data] if isinstance(data, dict) else [])


def id_of(row: dict) -> str | None:
    """A record's id: its "id", else the first "<kind>_id", written as ids are (A-100)."""
    for key in ["id"] + [key for key in row if key.endswith("_id")]:
        if isinstance(row.get(key), str) and re.fullmatch(text.ID, row[key]):
            return row[key]
    return None


@dataclass(frozen=True)
class Scope:
    """Where a call's arguments come from: the request, or the sentence of an order."""

    text: str  # the words that say what to do
    full_text: str  # where addresses and message wording are read
    entities: tuple[str, ...]
    ids: tuple[str, ...]
    emails: tuple[str, ...]
    fan_out: bool  # with no record named, use every record the lister returned


def scope_of(words: str, *, full_text: str | None = None, fan_out: bool = False, fallback: Scope | None = None):
    full = words if full_text is None else full_text
    entities, ids, addresses = tuple(text.entities(words)), tuple(text.ids(words)), tuple(text.emails(full))
    if fallback and not entities and not ids:
        entities, ids = fallback.entities, fallback.ids
    return Scope(words, full, entities, ids, addresses or (fallback.emails if fallback else ()), fan_out)


@dataclass
class Fill:
    status: str  # "ready" | "wait" | "skip"
    values: list = field(default_factory=list)  # ready: argument dicts or single values
    needs: list = field(default_factory=list)  # wait: (tool, arguments) lookups to make first
    reason: str = ""  # skip: why
    description: str = ""  # an expression: what it means, for the answer


def inferred_steps(request: str, tools: list[dict]) -> list[str]:
    """Tools whose name words appear in the request, most specific first among look-alikes; a
    calculator (a tool taking an `expression`) when the request holds arithmetic. A tool that
    changes something needs its verb said."""
    said, names, synonyms = text.words(request), [tool["name"] for tool in tools], text.wording().synonyms
    where: dict[str, int] = {}  # stem -> first position in the request
    for position, word in enumerate(said):
        for form in (text.stem(word), synonyms.get(text.stem(word))):
            if form:
                where.setdefault(form, position)
    matched: dict[str, int] = {}  # tool -> where in the request it was first named
    for tool in tools:
        name, parts = tool["name"], text.tool_words(tool["name"])
        if "expression" in properties(tool):
            if text.wants_arithmetic(request):
                matched[name] = 0
            continue
        hits = [where[text.stem(part)] for part in parts if text.stem(part) in where]
        if hits and 2 * len(hits) >= len(parts) and not (is_side_effect(name) and text.stem(parts[0]) not in where):
            matched[name] = min(hits)

    def stems(name):
        return frozenset(text.stem(part) for part in text.tool_words(name))

    def literal(name):  # words said exactly as the tool spells them, its verb included
        return sum(part in said for part in name.lower().split("_"))

    kept = []
    for name in matched:
        if any(stems(other) > stems(name) for other in matched):
            continue  # delete_account says more than get_account about "delete the account"
        twins = [other for other in matched if stems(other) == stems(name)]
        if name == max(twins, key=lambda other: (literal(other), -names.index(other))):
            kept.append(name)
    return sorted(kept, key=lambda name: (matched[name], names.index(name)))


class Planner:
    """Fills the arguments of steps and orders from a scope, the history and the tools' schemas."""

    def __init__(self, tools: dict, history: list[PastCall], steps: list[str]):
        self.tools, self.history, self.steps = tools, history, steps
        id_props = [(prop[:-3], spec) for tool in tools.values() for prop, spec in properties(tool).items()
                    if prop.endswith("_id")]
        self.kinds = list(dict.fromkeys(kind for kind, _ in id_props))
        self.patterns = {kind: spec.get("pattern") for kind, spec in reversed(id_props) if isinstance(spec, dict)}
        self.resolvers = {kind: self._tool_for(kind, lambda props: "query" in props) for kind in self.kinds}
        self.listers = {kind: self._tool_for(kind, lambda props: not props) for kind in self.kinds}
        self.known: dict[str, dict[str, dict]] = {kind: {} for kind in self.kinds}  # what lookups said
        self.names: dict[str, str] = {}  # record id -> name, from any result
        for call in history:
            lookup_of = [k for k in self.kinds if call.name in (self.resolvers[k], self.listers[k])]
            for row in rows(call.data):
                record_id = id_of(row)
                if record_id and row.get("name") and isinstance(row["name"], str):
                    self.names.setdefault(record_id, row["name"])
                if record_id and lookup_of:
                    self.known[lookup_of[0]].setdefault(record_id, {}).update(row, id=record_id)

    def _tool_for(self, kind: str, takes) -> str | None:
        return next((name for name, tool in self.tools.items() if takes(properties(tool))
                     and text.stem(kind) in {text.stem(word) for word in text.tool_words(name)}), None)

    def lookups(self) -> set[str]:
        return {tool for tool in [*self.resolvers.values(), *self.listers.values()] if tool}

    def made(self, name: str | None) -> list[PastCall]:
        return [call for call in self.history if call.name == name]

    def label(self, record_id: str) -> str:
        name = self.names.get(record_id)
        return f"{name} ({record_id})" if name else record_id

    def _is_id(self, value: str, kind: str) -> bool:
        pattern = self.patterns.get(kind)
        return bool(re.fullmatch(text.ID, value) and (not pattern or re.fullmatch(pattern, value)))

    # --- Records ------------------------------------------------------------------------------

    def find(self, name: str, kind: str) -> dict | None:
        """A known record called `name`: exact first, then one name starting with the other."""
        wanted = name.casefold()
        known = sorted(self.known[kind].values(), key=lambda record: str(record.get("id")))
        for rule in (lambda have: have == wanted,
                     lambda have: have.startswith(wanted + " ") or wanted.startswith(have + " ")):
            for record in known:
                if rule(str(record.get("name", "")).casefold()):
                    return record
        return None

    def lookup(self, query: str, kind: str) -> tuple[str, dict | None]:
        """How resolving `query` went: "ok" (with the record), "failed", "pending" or "none" (not asked)."""
        for call in self.made(self.resolvers[kind]):
            if str(call.arguments.get("query", "")).casefold() == query.casefold():
                found = [row for row in rows(call.data) if id_of(row)]
                if call.envelope is None:
                    return "pending", None
                return ("ok", {**found[0], "id": id_of(found[0])}) if found else ("failed", None)
        return "none", None

    def resolve(self, name: str, kind: str) -> Fill:
        """The record called `name`, or the lookup to make first."""
        found = self.find(name, kind)
        status, found = ("ok", found) if found else self.lookup(name, kind)
        if status == "ok":
            return Fill("ready", [found])
        if status == "pending":
            return Fill("wait")
        if status == "failed":
            return Fill("skip", reason=f"no {kind} matches {name!r}")
        resolver, lister = self.resolvers[kind], self.listers[kind]
        listed = self.made(lister)
        if lister in self.steps and (not listed or listed[0].envelope is None):
            return Fill("wait", needs=[(lister, {})])
        if resolver or (lister and not listed):
            return Fill("wait", needs=[(resolver, {"query": name}) if resolver else (lister, {})])
        return Fill("skip", reason=f"no way to look up the {kind} {name!r}")

    def named_records(self, scope: Scope, tool: str, kind: str) -> Fill:
        known, ids = self.known[kind], [i for i in scope.ids if self._is_id(i, kind)]
        if ids:
            return Fill("ready", [known.get(i, {"id": i}) for i in ids])
        if scope.entities:
            fills = [self.resolve(name, kind) for name in scope.entities]
            if any(fill.status == "wait" for fill in fills):
                return Fill("wait", needs=[need for fill in fills for need in fill.needs])
            values = [value for fill in fills if fill.status == "ready" for value in fill.values]
            return Fill("ready", values) if values else Fill("skip", reason="; ".join(f.reason for f in fills))
        lister = self.listers[kind]
        if scope.fan_out and lister and not is_side_effect(tool):
            listed = self.made(lister)
            answered = next((call for call in listed if call.ok), None)
            if answered:
                return Fill("ready", [known.get(i, {"id": i}) for i in map(id_of, rows(answered.data)) if i])
            if listed and listed[0].envelope is not None:
                return Fill("skip", reason=f"the {kind} list is not available")
            return Fill("wait", needs=[(lister, {})])
        return Fill("skip", reason=f"the request names no {kind}")

    # --- Arguments ----------------------------------------------------------------------------

    def calculation(self, scope: Scope, tool: str = "") -> Fill:
        """The expression for a calculator: "N% of <number or a record's field>", or bare arithmetic."""
        percent = text.percent_request(scope.text)
        if not percent:
            expression = text.plain_arithmetic(scope.text)
            return Fill("ready", [expression], description=expression) if expression else Fill(
                "skip", reason="the request has nothing to calculate")
        share, subject = percent
        number = text.parse_number(subject)
        if number is not None:
            return Fill("ready", [f"{text.number_text(number)} * {share} / 100"],
                        description=f"{share}% of {text.number_text(number)}")
        field_word = (text.words(subject) or [""])[-1]
        names = [name for name in scope.entities if name in subject] or list(scope.entities)
        kind = next((k for k in self.kinds if self.resolvers[k] or self.listers[k]), None)
        found = self.named_records(Scope(scope.text, scope.full_text, tuple(names[:1]), scope.ids[:1], (), False),
                                   tool, kind) if kind else Fill("ready", [{}])
        if found.status != "ready":
            return found
        record = found.values[0]
        value = record.get(field_word, record.get(text.wording().synonyms.get(field_word)))
        if value is None and names and kind and self.resolvers[kind] and self.lookup(names[0], kind)[0] == "none":
            return Fill("wait", needs=[(self.resolvers[kind], {"query": names[0]})])
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return Fill("skip", reason=f"no {field_word or 'number'} to take {share}% of")
        owner = self.names.get(record.get("id", ""), names[0] if names else record.get("id", ""))
        return Fill("ready", [f"{text.number_text(value)} * {share} / 100"],
                    description=f"{share}% of {owner}'s {subject.split()[-1]} ({text.number_text(value)})")

    def value_for(self, tool: str, prop: str, scope: Scope) -> Fill:
        key = prop.lower()
        if key.endswith("_id") and key[:-3] in self.kinds:
            found = self.named_records(scope, tool, key[:-3])
            found.values = [record["id"] for record in found.values] if found.status == "ready" else found.values
            return found
        resolves = next((kind for kind, resolver in self.resolvers.items() if resolver == tool), None)
        if key == "query" and resolves:
            names = list(scope.entities) or [i for i in scope.ids if self._is_id(i, resolves)]
            return Fill("ready", names) if names else Fill("skip", reason=f"the request names no {resolves}")
        if key in ("query", "q", "topic", "search"):
            about = text.topic(scope.text)
            return Fill("ready", [about]) if about else Fill("skip", reason="nothing to search for")
        if key in ("to", "email", "recipient", "address"):
            return Fill("ready", [scope.emails[0]]) if scope.emails else Fill("skip", reason="no email address given")
        if key in ("subject", "body") and scope.emails:
            return Fill("ready", [self.message(tool, scope.full_text, scope.emails[0])[key]])
        if key == "expression":
            return self.calculation(scope, tool)
        if key == "name" and scope.entities:
            return Fill("ready", [scope.entities[0]])
        return Fill("skip", reason=f"nothing to use for {prop}")

    def message(self, tool: str, words: str, address: str) -> dict:
        return text.message(words, address, str((self.tools.get(tool) or {}).get("description") or ""))

    def fill_step(self, tool: str, scope: Scope) -> Fill:
        """Argument sets for one tool: every combination of the values found (fan-out)."""
        schema = (self.tools.get(tool) or {}).get("input_schema") or {}
        chosen, needs = [], []
        for prop in schema.get("properties") or {}:
            fill = self.value_for(tool, prop, scope)
            if fill.status == "skip" and prop in set(schema.get("required") or []):
                return Fill("skip", reason=f"{tool}: {fill.reason}")
            if fill.status == "wait":
                needs.extend(fill.needs)
            elif fill.status == "ready":
                chosen.append((prop, list(dict.fromkeys(fill.values))))
        if needs:
            return Fill("wait", needs=needs)
        keys = [prop for prop, _ in chosen]
        return Fill("ready", [dict(zip(keys, combo, strict=True)) for combo in product(*(v for _, v in chosen))])

    def fill_order(self, order: Order, request: Scope) -> Fill:
        if order.arguments is not None:
            return Fill("ready", [order.arguments])
        if order.target_kind == "address":
            return Fill("ready", [self.message(order.tool, order.text, order.target)])
        if order.target_kind == "record":
            said = {text.stem(word) for word in text.tool_words(order.tool)}
            kind = next((kind for kind in self.kinds if text.stem(kind) in said), None)
            if kind is None:
                return Fill("skip", reason=f"{order.tool}: no way to look up {order.target!r}")
            if self._is_id(order.target, kind):
                return Fill("ready", [{f"{kind}_id": order.target}])
            found = self.resolve(order.target, kind)
            found.values = [{f"{kind}_id": found.values[0]["id"]}] if found.status == "ready" else found.values
            return found
        if order.tool in self.tools:
            return self.fill_step(order.tool, scope_of(order.text, fallback=request))
        return Fill("ready", [{}])
