"""What the conversation so far tells the scripted backend: calls made, results, accounts seen."""

import json
from dataclasses import dataclass

from agents.backends.base import tool_result_payload
from agents.backends.scripted_text import ACCOUNT_ID_RE

RESOLVER = "get_account"
LISTER = "list_accounts"


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


def parse_envelope(content) -> dict:
    """A tool message's content as an envelope; anything that is not one counts as plain data."""
    content = tool_result_payload(content)
    value = content
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            return {"ok": True, "data": content}
    if isinstance(value, dict) and isinstance(value.get("ok"), bool):
        return value
    return {"ok": True, "data": value}


def _arguments(raw) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def past_calls(messages: list[dict]) -> list[PastCall]:
    calls: list[tuple[str, str, dict]] = []
    results: dict[str, dict] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                calls.append(
                    (str(call.get("id", "")), call.get("name", ""), _arguments(call.get("arguments")))
                )
        elif message.get("role") == "tool":
            results[str(message.get("tool_call_id", ""))] = parse_envelope(message.get("content"))
    return [PastCall(id, name, arguments, results.get(id)) for id, name, arguments in calls]


def records(data) -> list[dict]:
    """The dicts in a result: a list of them, or a dict, or a dict wrapping a list of them."""
    if isinstance(data, list):
        return [item for item in data if isinstance(item, dict)]
    if isinstance(data, dict):
        for key in ("accounts", "results", "items"):
            if isinstance(data.get(key), list):
                return records(data[key])
        return [data]
    return []


def record_id(record: dict) -> str | None:
    for key in ("id", "account_id"):
        value = record.get(key)
        if isinstance(value, str) and ACCOUNT_ID_RE.fullmatch(value):
            return value
    return None


class Knowledge:
    """Accounts and lookups learned from successful results, for filling later arguments."""

    def __init__(self, calls: list[PastCall]):
        self.calls = calls
        self.accounts: dict[str, dict] = {}
        self.names: dict[str, str] = {}
        for call in calls:
            for record in records(call.data):
                account_id = record_id(record)
                if not account_id:
                    continue
                name = record.get("name") or record.get("account_name")
                if isinstance(name, str):
                    self.names.setdefault(account_id, name)
                if call.name in (RESOLVER, LISTER):
                    merged = self.accounts.setdefault(account_id, {})
                    merged.update(record)
                    merged["id"] = account_id

    def made(self, name: str) -> list[PastCall]:
        return [call for call in self.calls if call.name == name]

    def label(self, account_id: str) -> str:
        name = self.names.get(account_id)
        return f"{name} ({account_id})" if name else account_id

    def listed_ids(self) -> list[str] | None:
        """Account ids from list_accounts; None when it has not answered successfully."""
        for call in self.made(LISTER):
            if call.ok:
                return [i for i in (record_id(r) for r in records(call.data)) if i]
        return None

    def find(self, name: str) -> dict | None:
        """A known account called `name`: exact first, then one name starting with the other."""
        wanted = name.casefold()
        known = sorted(self.accounts.values(), key=lambda record: str(record.get("id")))
        for rule in (
            lambda have: have == wanted,
            lambda have: have.startswith(wanted + " ") or wanted.startswith(have + " "),
        ):
            for record in known:
                if rule(str(record.get("name", "")).casefold()):
                    return record
        return None

    def lookup(self, query: str) -> tuple[str, dict | None]:
        """How get_account(query) went: "ok" (with the account), "failed", "pending" or "none" (not asked)."""
        for call in self.made(RESOLVER):
            if str(call.arguments.get("query", "")).casefold() != query.casefold():
                continue
            if call.envelope is None:
                return "pending", None
            found = [r for r in records(call.data) if record_id(r)]
            return ("ok", {**found[0], "id": record_id(found[0])}) if found else ("failed", None)
        return "none", None
