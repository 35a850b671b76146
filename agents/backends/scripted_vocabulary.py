"""What the scripted backend knows about particular tools, supplied by modules that live beside them.

The backend knows no tool by name: it fills arguments by schema property names and reads the
request. Each module in VOCABULARY_MODULES defines `VOCABULARY = Vocabulary(...)`, plain data
keyed by tool name, and the backend merges them on first use:

- synonyms: a request word's stem -> a word of tool names ("churn" -> "health").
- records: how requests name the records the tools work on (an id pattern, the property that
  takes an id, a tool that resolves a name and one that lists them all); NO_RECORDS by default.
- orders: phrases that order a call without naming the tool ("email ADDRESS"), with the target.
- messages: tool -> composer(text, address, tool description) of its arguments, for a message
  to an address (subject, body, sign-off).
- answers: tool -> phrase(call, said) for one successful result in the final answer; summaries:
  tool -> phrase(calls, said) for all of a tool's results as one block, put before the others.
  `said.label(id)` names a record ("Acme Corp (A-100)"), `said.describe(expression)` tells what
  an expression the backend built means. A tool without an entry is shown as its JSON.
"""

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import import_module

VOCABULARY_MODULES = ("agents.tools.crm_wording",)
# Building blocks for order phrases: an address, and a record named by id, quotes or capitals.
ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
NAME = r"[A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*"


@dataclass(frozen=True)
class Records:
    noun: str  # "account": the id property is "<noun>_id" (or "<noun>")
    id_pattern: str  # as the request writes an id
    resolver: str  # called as {resolver_argument: name}, answers with the record
    resolver_argument: str
    lister: str  # called with {}, answers with every record
    list_keys: tuple[str, ...] = ("results", "items")  # where a result wraps a list of records
    name_keys: tuple[str, ...] = ("name",)
    attributes: dict = field(default_factory=dict)  # request word -> record field ("revenue" -> "arr")

    @property
    def id_properties(self) -> tuple[str, str]:
        return f"{self.noun}_id", self.noun

    def rows(self, data) -> list[dict]:
        """The dicts in a result: a list of them, a dict, or a dict wrapping a list of them."""
        if isinstance(data, list):
            return [item for item in data if isinstance(item, dict)]
        if isinstance(data, dict):
            for key in self.list_keys:
                if isinstance(data.get(key), list):
                    return self.rows(data[key])
            return [data]
        return []

    def id_of(self, row: dict) -> str | None:
        for key in ("id", self.id_properties[0]):
            value = row.get(key)
            if isinstance(value, str) and re.fullmatch(self.id_pattern, value):
                return value
        return None


NO_RECORDS = Records(noun="record", id_pattern=r"(?!)", resolver="", resolver_argument="", lister="")


@dataclass(frozen=True)
class OrderPhrase:
    tool: str
    pattern: str  # group 1 is the target
    target: str  # "address" or "record"
    flags: int = 0


@dataclass(frozen=True)
class Vocabulary:
    synonyms: dict = field(default_factory=dict)
    records: Records = NO_RECORDS
    orders: tuple[OrderPhrase, ...] = ()
    messages: dict = field(default_factory=dict)
    answers: dict = field(default_factory=dict)
    summaries: dict = field(default_factory=dict)


@cache
def vocabulary() -> Vocabulary:
    parts = [import_module(path).VOCABULARY for path in VOCABULARY_MODULES]
    return Vocabulary(
        synonyms={k: v for part in parts for k, v in part.synonyms.items()},
        records=next((part.records for part in parts if part.records is not NO_RECORDS), NO_RECORDS),
        orders=tuple(order for part in parts for order in part.orders),
        **{key: {k: v for part in parts for k, v in getattr(part, key).items()}
           for key in ("messages", "answers", "summaries")},
    )


def number_text(value) -> str:
    """240000.0 -> "240000", 0.125 -> "0.12": how numbers read in an answer."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)
