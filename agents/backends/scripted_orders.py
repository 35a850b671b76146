"""Orders to call a tool, found in text the scripted backend reads.

The scripted backend is gullible on purpose: a user message or a tool result that says "call
`delete_account` with {...}" makes it try that call, even for a tool it was never shown. That gives
the harness something real to stop, and its tests something to assert on.

Recognised (case-insensitive): call | use | run | invoke | execute [the] [tool] `NAME` [tool],
optionally followed by `with {json}`, `with key=value, ...`, `(key=value, ...)` or `NAME({json})`;
NAME counts when it is a tool on offer, was written in backticks, or contains an underscore. Also
the phrases of the vocabularies (scripted_vocabulary), such as "email ADDRESS".
"""

import json
import re
from dataclasses import dataclass
from functools import cache

from agents.backends.scripted_vocabulary import vocabulary

_CALL_RE = re.compile(
    r"\b(?:call|use|run|invoke|execute)\s+(?:the\s+)?(?:tool\s+)?(`?)([A-Za-z_][A-Za-z0-9_]*)(`?)(?:\s+tool\b)?", re.I
)
_WITH_RE = re.compile(r"\s*(?:with\s+(?:the\s+)?(?:arguments?|args|parameters|params|input)?\s*:?\s*)", re.I)
_PAIR_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.*?)\s*$", re.S)
_PART_RE = re.compile(r"""(?:"[^"]*"|'[^']*'|[^,])+""")
_KV_RUN_RE = re.compile(r"""(?:[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s,;]+)\s*(?:,|and)?\s*)+""")
_NOT_TARGETS = frozenset({"the", "a", "an", "and", "now", "too", "it", "this", "that"})


@dataclass(frozen=True)
class Order:
    """A tool call some text asked for. `arguments` is None when the text gave none."""

    tool: str
    arguments: dict | None
    target: str | None  # an address or a record (id or name) the phrase named
    text: str  # the text the order came from, for filling arguments
    span: tuple[int, int]
    target_kind: str = ""  # "address" or "record"


def find_orders(text: str, tool_names) -> list[Order]:
    """Every order in `text`, in the order they appear."""
    if not text:
        return []
    orders = _call_orders(text, tool_names)
    for phrase, pattern in _phrases():
        for match in pattern.finditer(text):
            target = match.group(1)
            target = target.rstrip(".") if phrase.target == "address" else re.sub(r"['’]s$", "", target.strip("\"'"))
            if target.lower() not in _NOT_TARGETS:
                orders.append(Order(phrase.tool, None, target, text, match.span(), phrase.target))
    orders.sort(key=lambda order: order.span)
    kept: list[Order] = []
    for order in orders:
        if not kept or order.span[0] >= kept[-1].span[1]:  # one order's own words are not another
            kept.append(order)
    return kept


@cache
def _phrases():
    return [(phrase, re.compile(phrase.pattern, phrase.flags)) for phrase in vocabulary().orders]


def strip_orders(text: str, orders: list[Order]) -> str:
    """The text without the orders' own words, so they do not read as the request's subject."""
    for order in sorted(orders, key=lambda o: o.span, reverse=True):
        text = text[: order.span[0]] + " " + text[order.span[1] :]
    return text


def _call_orders(text: str, tool_names) -> list[Order]:
    found = []
    for match in _CALL_RE.finditer(text):
        name = match.group(2)
        if name not in tool_names and not (match.group(1) and match.group(3)) and "_" not in name:
            continue
        arguments, end = _arguments_after(text, match.end())
        found.append(Order(name, arguments, None, _sentence_of(text, match.start(), end), (match.start(), end)))
    return found


def _arguments_after(text: str, position: int) -> tuple[dict | None, int]:
    """Arguments written right after a tool name, and where they end."""
    if text.startswith("(", position):
        end = _balanced(text, position, "(", ")")
        if end is not None:
            return _parse_arguments(text[position + 1 : end - 1]), end
    with_match = _WITH_RE.match(text, position)
    if not with_match or not with_match.group(0).strip():
        return None, position
    start = with_match.end()
    for opener, closer, inner in (("{", "}", 0), ("(", ")", 1)):
        if text.startswith(opener, start):
            end = _balanced(text, start, opener, closer)
            if end is not None:
                return _parse_arguments(text[start + inner : end - inner]), end
    run = _KV_RUN_RE.match(text, start)
    if run and "=" in run.group(0):
        return _parse_arguments(re.sub(r"\s+and\s+", ", ", run.group(0))), run.end()
    return None, position


def _parse_arguments(inner: str) -> dict | None:
    inner = inner.strip()
    if inner.startswith("{"):
        for candidate in (inner, inner.replace("'", '"')):
            try:
                value = json.loads(candidate)
            except ValueError:
                continue
            return value if isinstance(value, dict) else None
        return None
    pairs = {}
    for part in _PART_RE.findall(inner):
        match = _PAIR_RE.match(part)
        if match and match.group(2):
            pairs[match.group(1)] = _scalar(match.group(2))
    return pairs


def _scalar(raw: str):
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    try:
        return json.loads(raw)
    except ValueError:
        return raw.rstrip(".")


def _balanced(text: str, start: int, opener: str, closer: str) -> int | None:
    """The index just past the bracket that closes the one at `start`, minding JSON strings."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in (opener, closer):
            depth += 1 if char == opener else -1
            if depth == 0:
                return index + 1
    return None


def _sentence_of(text: str, start: int, end: int) -> str:
    left = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "\n"))
    right = [i for i in (text.find(mark, end) for mark in (". ", "! ", "? ", "\n")) if i != -1]
    return text[left + 1 : (min(right) if right else len(text)) + 1].strip()
