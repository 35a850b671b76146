"""Deciding what the scripted backend calls next, from what the conversation so far tells it.

The history: the calls made and their results, and the records (accounts, say) those results
named. Filling an argument has three outcomes: ready (the values, possibly several to fan out
over), wait (first make these lookup calls, e.g. resolve a name to an id) or skip (it cannot be
filled, and why). A call is as ready as its least ready argument. What a property takes goes by
its name: a record id, a resolver's query, a search topic, an address, a message's subject and
body (from the tool's vocabulary), an arithmetic expression, a name.
"""

import json
import re
from dataclasses import dataclass, field
from itertools import product

from agents.backends import scripted_text as text
from agents.backends.base import tool_result_payload
from agents.backends.scripted_text import Order
from agents.backends.scripted_vocabulary import Records, number_text, vocabulary

# --- The history ----------------------------------------------------------------------------


def call_key(name: str, arguments: dict) -> str:
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


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


_NOT_JSON = object()


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
                arguments = _json(raw, {}) if isinstance(raw, str) else raw
                calls.append((str(call.get("id", "")), call.get("name", ""), arguments))
        elif message.get("role") == "tool":
            content = tool_result_payload(message.get("content"))
            value = _json(content, _NOT_JSON) if isinstance(content, str) else content
            ok_envelope = isinstance(value, dict) and isinstance(value.get("ok"), bool)
            results[str(message.get("tool_call_id", ""))] = (
                value if ok_envelope else {"ok": True, "data": content if value is _NOT_JSON else value})
    return [PastCall(id, name, arguments if isinstance(arguments, dict) else {}, results.get(id))
            for id, name, arguments in calls]


class Knowledge:
    """Records (accounts, say) learned from successful results, for filling later arguments."""

    def __init__(self, calls: list[PastCall], records: Records):
        self.calls, self.records = calls, records
        self.known: dict[str, dict] = {}  # id -> what the resolver and the lister said of it
        self.names: dict[str, str] = {}
        for call in calls:
            for row in records.rows(call.data):
                record_id = records.id_of(row)
                if not record_id:
                    continue
                name = next((row.get(key) for key in records.name_keys if row.get(key)), None)
                if isinstance(name, str):
                    self.names.setdefault(record_id, name)
                if call.name in (records.resolver, records.lister):
                    merged = self.known.setdefault(record_id, {})
                    merged.update(row)
                    merged["id"] = record_id

    def made(self, name: str) -> list[PastCall]:
        return [call for call in self.calls if call.name == name]

    def label(self, record_id: str) -> str:
        name = self.names.get(record_id)
        return f"{name} ({record_id})" if name else record_id

    def listed_ids(self) -> list[str] | None:
        """Ids from the lister; None when it has not answered successfully."""
        for call in self.made(self.records.lister):
            if call.ok:
                return [i for i in map(self.records.id_of, self.records.rows(call.data)) if i]
        return None

    def find(self, name: str) -> dict | None:
        """A known record called `name`: exact first, then one name starting with the other."""
        wanted = name.casefold()
        known = sorted(self.known.values(), key=lambda record: str(record.get("id")))
        for rule in (lambda have: have == wanted,
                     lambda have: have.startswith(wanted + " ") or wanted.startswith(have + " ")):
            for record in known:
                if rule(str(record.get("name", "")).casefold()):
                    return record
        return None

    def lookup(self, query: str) -> tuple[str, dict | None]:
        """How resolving `query` went: "ok" (with the record), "failed", "pending" or "none" (not asked)."""
        for call in self.made(self.records.resolver):
            if str(call.arguments.get(self.records.resolver_argument, "")).casefold() != query.casefold():
                continue
            if call.envelope is None:
                return "pending", None
            found = [r for r in self.records.rows(call.data) if self.records.id_of(r)]
            return ("ok", {**found[0], "id": self.records.id_of(found[0])}) if found else ("failed", None)
        return "none", None


# --- Which tools, with which arguments -------------------------------------------------------

# Tools whose name starts with one of these change something: they are inferred only when the
# request says the verb, and never fanned out over every record.
SIDE_EFFECT_VERBS = frozenset(
    {"send", "delete", "remove", "create", "update", "write", "post", "cancel", "close", "drop", "wipe"}
)


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


def is_side_effect(tool: str) -> bool:
    return tool.split("_", 1)[0].lower() in SIDE_EFFECT_VERBS


def _properties(tool: dict | None) -> dict:
    return ((tool or {}).get("input_schema") or {}).get("properties") or {}


def inferred_steps(request: str, tools: list[dict]) -> list[str]:
    """Tools whose name words appear in the request, most specific first among look-alikes; a
    calculator (a tool taking an `expression`) when the request holds arithmetic."""
    said, names, synonyms = text.words(request), [tool["name"] for tool in tools], vocabulary().synonyms
    where: dict[str, int] = {}  # stem -> first position in the request
    for position, word in enumerate(said):
        for form in (text.stem(word), synonyms.get(text.stem(word))):
            if form:
                where.setdefault(form, position)
    matched: dict[str, int] = {}  # tool -> where in the request it was first named
    for tool in tools:
        name, parts = tool["name"], text.tool_words(tool["name"])
        if "expression" in _properties(tool):
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
    """Fills the arguments of steps and orders from a scope, the knowledge so far and the tools."""

    def __init__(self, tools: dict, knowledge: Knowledge, steps: list[str]):
        self.tools, self.names, self.knowledge, self.steps = tools, list(tools), knowledge, steps
        self.records = vocabulary().records

    def resolve(self, name: str) -> Fill:
        """The record called `name`, or the lookup to make first."""
        found = self.knowledge.find(name)
        if found:
            return Fill("ready", [found])
        status, found = self.knowledge.lookup(name)
        if status == "ok":
            return Fill("ready", [found])
        if status == "failed":
            return Fill("skip", reason=f"no {self.records.noun} matches {name!r}")
        if status == "pending":
            return Fill("wait")
        resolver, lister = self.records.resolver, self.records.lister
        listers = self.knowledge.made(lister)
        if lister in self.steps and (not listers or listers[0].envelope is None):
            return Fill("wait", needs=[(lister, {})])
        if resolver in self.names:
            return Fill("wait", needs=[(resolver, {self.records.resolver_argument: name})])
        if lister in self.names and not listers:
            return Fill("wait", needs=[(lister, {})])
        return Fill("skip", reason=f"no way to look up the {self.records.noun} {name!r}")

    def named_records(self, scope: Scope, tool: str) -> Fill:
        known, noun = self.knowledge.known, self.records.noun
        if scope.ids:
            return Fill("ready", [known.get(i, {"id": i}) for i in scope.ids])
        if scope.entities:
            fills = [self.resolve(name) for name in scope.entities]
            if any(fill.status == "wait" for fill in fills):
                return Fill("wait", needs=[need for fill in fills for need in fill.needs])
            values = [value for fill in fills if fill.status == "ready" for value in fill.values]
            return Fill("ready", values) if values else Fill("skip", reason="; ".join(f.reason for f in fills))
        if scope.fan_out and not is_side_effect(tool):
            listed = self.knowledge.listed_ids()
            if listed is not None:
                return Fill("ready", [known.get(i, {"id": i}) for i in listed])
            listers = self.knowledge.made(self.records.lister)
            if listers and listers[0].envelope is not None:
                return Fill("skip", reason=f"the {noun} list is not available")
            return Fill("wait", needs=[(self.records.lister, {})])
        return Fill("skip", reason=f"the request names no {noun}")

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
            return Fill("ready", [f"{number_text(number)} * {share} / 100"],
                        description=f"{share}% of {number_text(number)}")
        said = text.words(subject)
        field_word = said[-1] if said else ""
        names = [name for name in scope.entities if name in subject] or list(scope.entities)
        found = self.named_records(Scope(scope.text, scope.full_text, tuple(names[:1]), scope.ids[:1], (), False), tool)
        if found.status != "ready":
            return found
        record = found.values[0]
        value = record.get(self.records.attributes.get(field_word, field_word))
        if value is None and names and self.knowledge.lookup(names[0])[0] == "none" and (
                self.records.resolver in self.names):
            return Fill("wait", needs=[(self.records.resolver, {self.records.resolver_argument: names[0]})])
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return Fill("skip", reason=f"no {field_word or 'number'} to take {share}% of")
        owner = self.knowledge.names.get(record.get("id", ""), names[0] if names else record.get("id", ""))
        return Fill("ready", [f"{number_text(value)} * {share} / 100"],
                    description=f"{share}% of {owner}'s {subject.split()[-1]} ({number_text(value)})")

    def value_for(self, tool: str, prop: str, scope: Scope) -> Fill:
        key, records = prop.lower(), self.records
        if key in records.id_properties:
            found = self.named_records(scope, tool)
            found.values = [record["id"] for record in found.values] if found.status == "ready" else found.values
            return found
        if key == records.resolver_argument and records.noun in tool:
            names = list(scope.entities) or list(scope.ids)
            return Fill("ready", names) if names else Fill("skip", reason=f"the request names no {records.noun}")
        if key in ("query", "q", "topic", "search"):
            about = text.topic(scope.text)
            return Fill("ready", [about]) if about else Fill("skip", reason="nothing to search for")
        if key in ("to", "email", "recipient", "address"):
            return Fill("ready", [scope.emails[0]]) if scope.emails else Fill("skip", reason="no email address given")
        if key in ("subject", "body") and scope.emails and tool in vocabulary().messages:
            return Fill("ready", [self.message(tool, scope.full_text, scope.emails[0])[key]])
        if key == "expression":
            return self.calculation(scope, tool)
        if key == "name" and scope.entities:
            return Fill("ready", [scope.entities[0]])
        return Fill("skip", reason=f"nothing to use for {prop}")

    def message(self, tool: str, words: str, address: str) -> dict:
        description = str((self.tools.get(tool) or {}).get("description") or "")
        return vocabulary().messages[tool](words, address, description)

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
        if order.target_kind == "address" and order.tool in vocabulary().messages:
            return Fill("ready", [self.message(order.tool, order.text, order.target)])
        if order.target_kind == "record":
            id_property = self.records.id_properties[0]
            if re.fullmatch(self.records.id_pattern, order.target):
                return Fill("ready", [{id_property: order.target}])
            found = self.resolve(order.target)
            found.values = [{id_property: found.values[0]["id"]}] if found.status == "ready" else found.values
            return found
        if order.tool in self.tools:
            return self.fill_step(order.tool, scope_of(order.text, fallback=request))
        return Fill("ready", [{}])
