"""Reading text the way the scripted backend does: prompt steps, words, names, ids, topics,
arithmetic, a message's wording, and orders to call a tool.

Pure functions with deliberately plain rules (regular expressions and word lists), so a test can
predict what the backend reads in a sentence. What particular tools add (synonyms, order phrases,
how their results read) comes from the wording modules beside them (WORDING_MODULES).
"""

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from types import SimpleNamespace

from agents import prompt_format as fmt

WORDING_MODULES = ("agents.tools.crm_wording",)
ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
NAME = r"[A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*"  # a run of capitalised words
ID = r"\b[A-Z][A-Z0-9]*-\d+\b"  # how a record's id is written: A-100, T-2
EMAIL_RE = re.compile(ADDRESS)
_STEP_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\([^`]*\))?`")  # `name` or `name(arguments)`
_CLAUSE_SPLIT_RE = re.compile(r"[.;,:!?\n]")
_NEGATION_RE = re.compile(r"\b(?:never|not|don't|do not|must not|avoid|without)\b", re.I)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_POSSESSIVE_RE = re.compile(r"['’]s?$")
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
# Capitalised words that are not names: question words, imperatives, fillers, calendar words.
COMMON_WORDS = frozenset(
    """a also an and any are as at be but by can could did do does each every for from give had has
    have hello hey hi how however i i'm if in is it its let me my no not now of ok okay on or our
    please regards show so summarise summarize tell thanks thank the their then there these this
    those to us was we what when where which who why will with would yes you your
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december ignore note important system""".split()
)
STOPWORDS = COMMON_WORDS | frozenset(
    """all about am been being base did does doing done don't just knowledge kb more most much
    say says should some such than that them they too very""".split()
)
# Words of a tool name that do not say what it is about, left out when matching a request.
GENERIC_VERBS = frozenset({"get", "list", "compute", "search", "fetch", "find", "read", "by", "for", "of"})


@cache
def wording() -> SimpleNamespace:
    """The wording modules merged: SYNONYMS (a request word's stem -> a word the tools use), ORDERS
    ((tool, pattern, "address" or "record") phrases that order a call without naming the tool;
    group 1 is the target), ANSWERS (tool -> phrase(call, said)) and SUMMARIES (tool ->
    phrase(calls, said), one block for all of a tool's results)."""
    parts = [import_module(path) for path in WORDING_MODULES]
    merged = {key: {k: v for part in parts for k, v in getattr(part, key, {}).items()}
              for key in ("SYNONYMS", "ANSWERS", "SUMMARIES", "MESSAGES")}
    orders = [(tool, re.compile(pattern), kind) for part in parts for tool, pattern, kind in getattr(part, "ORDERS", ())]
    return SimpleNamespace(synonyms=merged["SYNONYMS"], answers=merged["ANSWERS"], summaries=merged["SUMMARIES"],
                           messages=merged["MESSAGES"], orders=orders)


def planned_steps(system: str, tool_names) -> list[str]:
    """Backticked tool names in the playbook and skill sections, first mention first, only tools on
    offer; a mention in a clause that says not to use it ("Never call `send_email`.") is no step."""
    steps: list[str] = []
    for body in fmt.step_sections(system):
        for match in _STEP_RE.finditer(body):
            name = match.group(1)
            clause = _CLAUSE_SPLIT_RE.split(body[: match.start()])[-1]
            if name in tool_names and name not in steps and not _NEGATION_RE.search(clause):
                steps.append(name)
    return steps


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_SPLIT_RE.split(text or "") if part.strip()]


def stem(word: str) -> str:
    """A crude stem, applied alike to tool names and requests: tickets ~ ticket, healthy ~ health."""
    word = _POSSESSIVE_RE.sub("", word.lower())
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    return word[:-1] if word.endswith("y") and len(word) > 4 else word


def words(text: str) -> list[str]:
    """Lower-case words, underscores split, possessives dropped."""
    return [_POSSESSIVE_RE.sub("", w.lower()) for w in _WORD_RE.findall((text or "").replace("_", " "))]


def tool_words(name: str) -> list[str]:
    return [w for w in name.lower().split("_") if w and w not in GENERIC_VERBS]


def ids(text: str) -> list[str]:
    return list(dict.fromkeys(re.findall(ID, text or "")))


def emails(text: str) -> list[str]:
    return list(dict.fromkeys(match.rstrip(".") for match in EMAIL_RE.findall(text or "")))


def entities(text: str) -> list[str]:
    """Runs of capitalised words that are not a sentence's first word nor common words.

    "How healthy is Acme Corp?" -> ["Acme Corp"]; "What is 10% of Acme's ARR?" -> ["Acme"].
    """
    found: list[str] = []

    def close(run: list[str]) -> None:
        if run and " ".join(run) not in found:
            found.append(" ".join(run))
        run.clear()

    for sentence in sentences(EMAIL_RE.sub(" ", re.sub(ID, " ", text or ""))):
        run: list[str] = []
        for index, raw in enumerate(sentence.split()):
            token = raw.strip("\"'“”‘’()[]{}").rstrip(",;:.!?")
            bare = _POSSESSIVE_RE.sub("", token)
            if index > 0 and bare and bare[0].isupper() and bare.lower() not in COMMON_WORDS and not (
                    len(bare) > 1 and bare.isupper()) and all(ch.isalpha() or ch in "&-" for ch in bare):
                run.append(bare)  # ARR, NPS, SSO (acronyms) are not names
                if _POSSESSIVE_RE.search(token) or re.search(r"[,;:.!?)\]}]$", raw.rstrip("\"'”’")):
                    close(run)  # "Acme's ARR", "Globex, Initech"
            else:
                close(run)
        close(run)
    return found


def _phrase_after(pattern: str, sentence: str) -> str:
    """The words after a marker ("about the Acme renewal."), up to the sentence's end, without an article."""
    match = re.search(pattern, sentence, re.I)
    phrase = re.split(r"[?!\n]|\.(?:\s|$)", match.group(1))[0].strip(" .,;:\"'") if match else ""
    return re.sub(r"^(?:the|our|a|an)\s+", "", phrase, flags=re.I)


def topic(text: str) -> str:
    """What a search is about: the phrase after about/regarding, else the request's content words."""
    first = next(iter(sentences(text)), "")
    for pattern in (r"\b(?:about|regarding|concerning)\s+(.+)", r"\b(?:on|for)\s+(.+)"):
        if phrase := _phrase_after(pattern, first):
            return phrase
    return " ".join(w for w in words(first) if w not in STOPWORDS and not w.isdigit())


# --- Numbers and arithmetic -----------------------------------------------------------------

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_PERCENT_OF_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:%|percent\b)\s*of\s+([^?!\n]+)", re.I)
_WORD_OPERATORS = ((r"\bmultiplied by\b", "*"), (r"\btimes\b", "*"), (r"\bdivided by\b", "/"), (r"\bplus\b", "+"),
                   (r"\bminus\b", "-"))
_ARITHMETIC_RE = re.compile(rf"\(*\s*{_NUMBER}\s*\)*(?:\s*[-+*/×÷x]\s*\(*\s*{_NUMBER}\s*\)*)+")


def number_text(value) -> str:
    """240000.0 -> "240000", 0.125 -> "0.12": how numbers read in an answer."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def parse_number(text: str):
    try:
        value = float(text.strip().lstrip("$€£").replace(",", ""))
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


def percent_request(text: str):
    """("10", "Acme's ARR") for "What is 10% of Acme's ARR?", else None."""
    match = _PERCENT_OF_RE.search(text or "")
    return (match.group(1), re.split(r"\.(?:\s|$)", match.group(2))[0].strip(" .,;:")) if match else None


def plain_arithmetic(text: str) -> str | None:
    """A bare expression such as "12 * (3 + 4)" written in the text, normalised, else None."""
    spoken = text or ""
    for pattern, symbol in _WORD_OPERATORS:
        spoken = re.sub(pattern, symbol, spoken, flags=re.I)
    for match in _ARITHMETIC_RE.finditer(spoken):
        candidate = match.group(0).strip()
        if re.match(r"^\d{4}-\d{2}-\d{2}$", candidate) or candidate.count("(") != candidate.count(")"):
            continue  # a date, or half a parenthesis
        candidate = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " * ", candidate).replace("÷", "/")
        return re.sub(r"(?<=\d),(?=\d{3})", "", " ".join(candidate.split()))
    return None


def wants_arithmetic(text: str) -> bool:
    return bool(percent_request(text) or plain_arithmetic(text)
                or any(re.fullmatch(r"calculat(?:e|or|ion)", word) for word in words(text)))


# --- Orders ---------------------------------------------------------------------------------
# The backend is gullible on purpose: a user message or a tool result that says "call
# `delete_account` with {...}" makes it try that call, even for a tool it was never shown. That
# gives the harness something real to stop, and its tests something to assert on. Recognised
# (case-insensitive): call | use | run | invoke | execute [the] [tool] `NAME` [tool], optionally
# followed by `with {json}`, `with key=value, ...`, `(key=value, ...)` or `NAME({json})`; NAME
# counts when it is a tool on offer, was written in backticks, or contains an underscore. Also the
# order phrases of the wording modules, such as "email ADDRESS".

_CALL_RE = re.compile(
    r"\b(?:call|use|run|invoke|execute)\s+(?:the\s+)?(?:tool\s+)?(`?)([A-Za-z_][A-Za-z0-9_]*)(`?)(?:\s+tool\b)?", re.I
)
_WITH_RE = re.compile(r"\s*with\s+(?:the\s+)?(?:arguments?|args|parameters|params|input)?\s*:?\s*", re.I)
_PAIR_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.*?)\s*$", re.S)
_PART_RE = re.compile(r"""(?:"[^"]*"|'[^']*'|[^,])+""")
_KV_RUN_RE = re.compile(r"""(?:[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s,;]+)\s*(?:,|and)?\s*)+""")
_NOT_TARGETS = frozenset({"the", "a", "an", "and", "now", "too", "it", "this", "that"})
_JSON = json.JSONDecoder()


@dataclass(frozen=True)
class Order:
    """A tool call some text asked for. `arguments` is None when the text gave none."""

    tool: str
    arguments: dict | None
    target: str | None  # an address or a record (id or name) the phrase named
    text: str  # the sentence the order came from, for filling arguments
    span: tuple[int, int]
    target_kind: str = ""  # "address" or "record"


def find_orders(text: str, tool_names) -> list[Order]:
    """Every order in `text`, in the order they appear; one order's own words are not another."""
    orders = []
    for match in _CALL_RE.finditer(text or ""):
        name = match.group(2)
        if name in tool_names or (match.group(1) and match.group(3)) or "_" in name:
            arguments, end = _arguments_after(text, match.end())
            orders.append(Order(name, arguments, None, _sentence_of(text, match.start(), end), (match.start(), end)))
    for tool, pattern, kind in wording().orders:
        for match in pattern.finditer(text or ""):
            target = match.group(1).rstrip(".") if kind == "address" else re.sub(r"['’]s$", "", match.group(1).strip("\"'"))
            if target.lower() not in _NOT_TARGETS:
                orders.append(Order(tool, None, target, text, match.span(), kind))
    kept: list[Order] = []
    for order in sorted(orders, key=lambda order: order.span):
        if not kept or order.span[0] >= kept[-1].span[1]:
            kept.append(order)
    return kept


def strip_orders(text: str, orders: list[Order]) -> str:
    """The text without the orders' own words, so they do not read as the request's subject."""
    for order in sorted(orders, key=lambda o: o.span, reverse=True):
        text = text[: order.span[0]] + " " + text[order.span[1] :]
    return text


def _arguments_after(text: str, position: int) -> tuple[dict | None, int]:
    """Arguments written right after a tool name, and where they end."""
    start = position
    if not text.startswith("(", start):
        said_with = _WITH_RE.match(text, start)
        if not said_with:
            return None, position
        start = said_with.end()
        run = None if text.startswith(("{", "("), start) else _KV_RUN_RE.match(text, start)
        if run:
            return _pairs(re.sub(r"\s+and\s+", ", ", run.group(0))), run.end()
    inner = start + text.startswith("(", start)
    if text.startswith("{", inner):  # JSON, or JSON written with single quotes
        for candidate in (text, text.replace("'", '"')):
            try:
                value, end = _JSON.raw_decode(candidate, inner)
            except ValueError:
                continue
            return (value if isinstance(value, dict) else None), end + (inner > start and text.startswith(")", end))
        return None, position
    close = text.find(")", inner)
    return (_pairs(text[inner:close]), close + 1) if inner > start and close != -1 else (None, position)


def _pairs(inner: str) -> dict:
    pairs = {}
    for part in _PART_RE.findall(inner):
        match = _PAIR_RE.match(part)
        if match and match.group(2):
            raw = match.group(2)
            if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
                pairs[match.group(1)] = raw[1:-1]
                continue
            try:
                pairs[match.group(1)] = json.loads(raw)
            except ValueError:
                pairs[match.group(1)] = raw.rstrip(".")
    return pairs


def _sentence_of(text: str, start: int, end: int) -> str:
    left = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "\n"))
    right = [i for i in (text.find(mark, end) for mark in (". ", "! ", "? ", "\n")) if i != -1]
    return text[left + 1 : (min(right) if right else len(text)) + 1].strip()
