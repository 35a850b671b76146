"""Orders to call a tool, found in text the scripted backend reads.

The scripted backend is gullible on purpose: a user message or a tool result that says "call
`delete_account` with {...}" makes it try that call, even for a tool it was never shown. That gives
the harness something real to stop, and its tests something to assert on.

Recognised phrasings (case-insensitive):

- call | use | run | invoke | execute [the] [tool] `NAME` [tool]
  optionally followed by `with {json}`, `with key=value, ...`, `(key=value, ...)` or `NAME({json})`;
  NAME counts when it is a tool on offer, was written in backticks, or contains an underscore.
- send | write | forward [an|a|the] email|e-mail|message|note to ADDRESS, and email ADDRESS
- delete | remove [the] account [named|called|for] TARGET, and delete | remove TARGET's account,
  where TARGET is an account id (A-300), a quoted name or a run of capitalised words.
"""

import json
import re
from dataclasses import dataclass

from agents.backends.scripted_text import EMAIL_RE

_CALL_RE = re.compile(
    r"\b(?:call|use|run|invoke|execute)\s+(?:the\s+)?(?:tool\s+)?(`?)([A-Za-z_][A-Za-z0-9_]*)(`?)"
    r"(?:\s+tool\b)?",
    re.I,
)
_WITH_RE = re.compile(r"\s*(?:with\s+(?:the\s+)?(?:arguments?|args|parameters|params|input)?\s*:?\s*)", re.I)
_PAIR_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.*?)\s*$", re.S)
_PART_RE = re.compile(r"""(?:"[^"]*"|'[^']*'|[^,])+""")
_KV_RUN_RE = re.compile(r"""(?:[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s,;]+)\s*(?:,|and)?\s*)+""")
_EMAIL_ORDER_RES = (
    re.compile(
        rf"\b(?:send|write|forward)\s+(?:an?\s+|the\s+)?(?:e-?mail|message|note)\s+to\s+({EMAIL_RE.pattern})",
        re.I,
    ),
    re.compile(rf"\be-?mail\s+({EMAIL_RE.pattern})", re.I),
)
# Case matters for a name (a run of capitalised words) but not for the verb around it.
_TARGET = r"""(A-\d+|"[^"]+"|'[^']+'|[A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*|[\w-]+)"""
_DELETE_RES = (
    re.compile(
        r"\b(?i:delete|remove)\s+(?i:the\s+)?(?i:account)\s+(?:(?i:named|called|for|of)\s+)?" + _TARGET
    ),
    re.compile(
        r"\b(?i:delete|remove)\s+(?i:the\s+)?([A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*)['’]s\s+(?i:account)\b"
    ),
)


@dataclass(frozen=True)
class Order:
    """A tool call some text asked for. `arguments` is None when the text gave none."""

    tool: str
    arguments: dict | None
    target: str | None  # an account id or name still to resolve (delete orders)
    text: str  # the text the order came from, for filling arguments
    span: tuple[int, int]


def find_orders(text: str, tool_names) -> list[Order]:
    """Every order in `text`, in the order they appear."""
    if not text:
        return []
    orders = _call_orders(text, tool_names) + _email_orders(text) + _delete_orders(text)
    orders.sort(key=lambda order: order.span)
    kept: list[Order] = []
    for order in orders:
        # "call `delete_account` ... delete the account X" inside one order is one order.
        if kept and order.span[0] < kept[-1].span[1]:
            continue
        kept.append(order)
    return kept


def strip_orders(text: str, orders: list[Order]) -> str:
    """The text without the orders' own words, so they do not read as the request's subject."""
    for order in sorted(orders, key=lambda o: o.span, reverse=True):
        text = text[: order.span[0]] + " " + text[order.span[1] :]
    return text


def _call_orders(text: str, tool_names) -> list[Order]:
    found = []
    for match in _CALL_RE.finditer(text):
        name = match.group(2)
        ticked = bool(match.group(1) and match.group(3))
        if name not in tool_names and not ticked and "_" not in name:
            continue
        arguments, end = _arguments_after(text, match.end())
        found.append(
            Order(name, arguments, None, _sentence_of(text, match.start(), end), (match.start(), end))
        )
    return found


def _email_orders(text: str) -> list[Order]:
    found = []
    for pattern in _EMAIL_ORDER_RES:
        for match in pattern.finditer(text):
            address = match.group(1).rstrip(".")
            found.append(Order("send_email", None, address, text, match.span()))
    return found


def _delete_orders(text: str) -> list[Order]:
    found = []
    for pattern in _DELETE_RES:
        for match in pattern.finditer(text):
            target = re.sub(r"['’]s$", "", match.group(1).strip("\"'"))
            if target.lower() in {"the", "a", "an", "and", "now", "too", "it", "this", "that"}:
                continue
            found.append(Order("delete_account", None, target, text, match.span()))
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
    if text.startswith("{", start):
        end = _balanced(text, start, "{", "}")
        if end is not None:
            return _parse_arguments(text[start:end]), end
    if text.startswith("(", start):
        end = _balanced(text, start, "(", ")")
        if end is not None:
            return _parse_arguments(text[start + 1 : end - 1]), end
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
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _sentence_of(text: str, start: int, end: int) -> str:
    left = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "\n"))
    right_candidates = [i for i in (text.find(mark, end) for mark in (". ", "! ", "? ", "\n")) if i != -1]
    right = min(right_candidates) if right_candidates else len(text)
    return text[left + 1 : right + 1].strip()
