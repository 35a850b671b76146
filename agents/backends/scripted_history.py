"""What the conversation so far tells the scripted backend: calls made, their results, records seen."""

import json
from dataclasses import dataclass

from agents.backends.base import tool_result_payload
from agents.backends.scripted_vocabulary import Records


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

    def __init__(self, calls: list[PastCall], records: Records | None):
        self.calls, self.records = calls, records
        self.known: dict[str, dict] = {}  # id -> what the resolver and the lister said of it
        self.names: dict[str, str] = {}
        for call in calls if records else []:
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
