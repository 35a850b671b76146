"""Reading text the way the scripted backend does: steps, words, names, ids, topics and orders to
call a tool. Plain rules (regular expressions, word lists), so a test can predict what it reads.
What particular tools add comes from the wording modules beside them (WORDING_MODULES).
"""

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from types import SimpleNamespace

from agents import prompt_format as fmt

WORDING_MODULES = ("agents.tools.crm_wording", "agents.tools.calculator_wording")
ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
ID = r"\b[A-Z][A-Z0-9]*-\d+\b"  # how a record's id is written: A-100, T-2
_POSSESSIVE = r"['’]s?$"
# Capitalised words that are not names: question words, imperatives, fillers, calendar words.
COMMON_WORDS = frozenset(
    """a also an and any are as at be but by can could did do does each every for from give had has
    have hello hey hi how however i i'm if in is it its let me my no not now of ok okay on or our
    please regards show so summarise summarize tell thanks thank the their then there these this
    those to us was we what when where which who why will with would yes you your
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december ignore note important system""".split()
)
# Words of a tool name that do not say what it is about, left out when matching a request.
GENERIC_VERBS = frozenset({"get", "list", "compute", "search", "fetch", "find", "read", "by", "for", "of"})


@cache
def wording() -> SimpleNamespace:
    """The wording modules merged. Each may define SYNONYMS (a request word's stem -> a word the
    tools use), ORDERS ((tool, pattern): a phrase that orders a call without naming the tool, group 1
    its target: an address, a record's id or its name), ASKED (property -> predicate(request): a tool
    taking it is a step when the request says so), FILLS (property -> filler(plan, tool, scope) ->
    Fill, or None to leave the property to the planner), ANSWERS (tool -> phrase(call, said)) and
    SUMMARIES (tool -> phrase(calls, said): one block for all of a tool's results)."""
    parts = [import_module(path) for path in WORDING_MODULES]
    merged = {key.lower(): {k: v for part in parts for k, v in getattr(part, key, {}).items()}
              for key in ("SYNONYMS", "ASKED", "FILLS", "ANSWERS", "SUMMARIES")}
    orders = [(tool, re.compile(pattern)) for part in parts for tool, pattern in getattr(part, "ORDERS", ())]
    return SimpleNamespace(**merged, orders=orders)


def planned_steps(system: str, tool_names) -> list[str]:
    """Backticked tool names in the playbook and skill sections, first mention first, only tools on
    offer; a mention in a clause that says not to use it ("Never call `send_email`.") is no step."""
    steps: list[str] = []
    for body in fmt.step_sections(system):
        for match in re.finditer(r"`([A-Za-z_]\w*)(?:\([^`]*\))?`", body):  # `name` or `name(arguments)`
            clause = re.split(r"[.;,:!?\n]", body[: match.start()])[-1]
            negated = re.search(r"\b(?:never|not|don't|do not|must not|avoid|without)\b", clause, re.I)
            if match.group(1) in tool_names and match.group(1) not in steps and not negated:
                steps.append(match.group(1))
    return steps


def sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+|\n+", text or "") if part.strip()]


def stem(word: str) -> str:
    """A crude stem, applied alike to tool names and requests: tickets ~ ticket, healthy ~ health."""
    word = re.sub(_POSSESSIVE, "", word.lower())
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    return word[:-1] if word.endswith("y") and len(word) > 4 else word


def words(text: str) -> list[str]:
    """Lower-case words, underscores split, possessives dropped."""
    return [re.sub(_POSSESSIVE, "", w.lower()) for w in re.findall(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?",
                                                                    (text or "").replace("_", " "))]


def tool_words(name: str) -> list[str]:
    """The stems of the words of a tool's name that say what it is about: delete_account -> delete, account."""
    return [stem(w) for w in name.lower().split("_") if w and w not in GENERIC_VERBS]


def distinct(pattern: str, text: str) -> list[str]:
    """What the pattern finds in the text, each once, first first: distinct(ID, ...) -> ids."""
    return list(dict.fromkeys(re.findall(pattern, text or "")))


def entities(text: str) -> list[str]:
    """Runs of capitalised words that are not a sentence's first word, a common word or an acronym:
    "How healthy is Acme Corp?" -> ["Acme Corp"]; "What is 10% of Acme's ARR?" -> ["Acme"]."""
    found: list[str] = []
    for sentence in sentences(re.sub(f"{ID}|{ADDRESS}", " ", text or "")):
        run: list[str] = []
        for index, raw in enumerate(sentence.split() + [""]):
            token = raw.strip("\"'“”‘’()[]{}").rstrip(",;:.!?")
            bare = re.sub(_POSSESSIVE, "", token)
            if index and bare[:1].isupper() and bare.lower() not in COMMON_WORDS and not (
                    len(bare) > 1 and bare.isupper()) and all(ch.isalpha() or ch in "&-" for ch in bare):
                run.append(bare)
                if not (re.search(_POSSESSIVE, token) or re.search(r"[,;:.!?)\]}]$", raw.rstrip("\"'”’"))):
                    continue  # a name ends at "Acme's ARR", "Globex, Initech"
            if run and " ".join(run) not in found:
                found.append(" ".join(run))
            run = []
    return found


def phrase_after(marker: str, sentence: str) -> str:
    """The words after a marker, up to the sentence's end: "about the Acme renewal." -> "the Acme renewal"."""
    match = re.search(rf"\b(?:{marker})\s+(.+)", sentence, re.I)
    return re.split(r"[?!\n]|\.(?:\s|$)", match.group(1))[0].strip(" .,;:\"'") if match else ""


def topic(text: str) -> str:
    """What a search is about: the phrase after about/regarding (else on/for) in the first sentence."""
    first = next(iter(sentences(text)), "")
    for marker in ("about|regarding|concerning", "on|for"):
        if phrase := re.sub(r"^(?:the|our|a|an)\s+", "", phrase_after(marker, first), flags=re.I):
            return phrase
    return ""


# --- Orders ---------------------------------------------------------------------------------
# Gullible on purpose (see scripted.py). Recognised, case-insensitive: call | use | run | invoke |
# execute [the] [tool] NAME [tool], NAME being a tool on offer, in backticks or with an underscore,
# then optionally arguments (see _arguments_after); and the wording modules' order phrases.

_CALL_RE = re.compile(
    r"\b(?:call|use|run|invoke|execute)\s+(?:the\s+)?(?:tool\s+)?(`?)([A-Za-z_]\w*)(`?)(?:\s+tool\b)?", re.I)
_WITH_RE = re.compile(r"\s*with\s+(?:the\s+)?(?:arguments?|args|parameters|params|input)?\s*:?\s*", re.I)
_KV_RUN_RE = re.compile(r"""(?:[A-Za-z_]\w*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s,;]+)\s*(?:,|and)?\s*)+""")
_PAIR_RE = re.compile(r"""([A-Za-z_]\w*)\s*[=:]\s*("[^"]*"|'[^']*'|[^,\s](?:[^,]*?[^,\s])??)(?=\s*(?:,|$))""")


@dataclass(frozen=True)
class Order:
    """A tool call some text asked for. `arguments` is None when the text gave none."""

    tool: str
    arguments: dict | None
    target: str | None  # an address or a record (id or name) the phrase named
    text: str  # the sentence the order came from, for filling arguments
    span: tuple[int, int]


def find_orders(text: str, tool_names) -> list[Order]:
    """Every order in `text`, in the order they appear; one order's own words are not another."""
    orders = []
    for match in _CALL_RE.finditer(text or ""):
        if match.group(2) in tool_names or (match.group(1) and match.group(3)) or "_" in match.group(2):
            arguments, end = _arguments_after(text, match.end())
            sentence = next((part for part in sentences(text) if match.group(2) in part), text)
            orders.append(Order(match.group(2), arguments, None, sentence, (match.start(), end)))
    for tool, pattern in wording().orders:
        for match in pattern.finditer(text or ""):
            target = match.group(1).strip("'\"")  # a name may be quoted
            if target.lower() not in ("the", "a", "an", "and", "now", "too", "it", "this", "that"):
                orders.append(Order(tool, None, target, text, match.span()))
    kept: list[Order] = []
    for order in sorted(orders, key=lambda order: order.span):
        if not kept or order.span[0] >= kept[-1].span[1]:
            kept.append(order)
    return kept


def strip_orders(text: str, orders: list[Order]) -> str:
    """The text without the words of the orders (in find_orders' order): they are not the request's subject."""
    for order in reversed(orders):
        text = text[: order.span[0]] + " " + text[order.span[1] :]
    return text


def _arguments_after(text: str, position: int) -> tuple[dict | None, int]:
    """Arguments right after a tool name, and where they end: `({json})` or `(key=value, ...)`,
    or after "with [the arguments]" `{json}`, `(key=value, ...)` or `key=value, ... [and key=value]`."""
    said_with = _WITH_RE.match(text, position)
    start = said_with.end() if said_with else position
    inner = start + text.startswith("(", start)
    if text.startswith("{", inner):
        try:
            value, end = json.JSONDecoder().raw_decode(text, inner)
        except ValueError:
            return None, position
        return (value if isinstance(value, dict) else None), end + (inner > start and text.startswith(")", end))
    elif inner > start and ")" in text[inner:]:
        return _pairs(text[inner : text.index(")", inner)]), text.index(")", inner) + 1
    elif said_with and (run := _KV_RUN_RE.match(text, start)):
        return _pairs(re.sub(r"\s+and\s+", ", ", run.group(0)).strip(" ,")), run.end()
    return None, position


def _pairs(written: str) -> dict:
    pairs = {}
    for key, raw in _PAIR_RE.findall(written):
        try:
            pairs[key] = raw[1:-1] if raw[0] == raw[-1] and raw[0] in "\"'" and len(raw) > 1 else json.loads(raw)
        except ValueError:
            pairs[key] = raw.rstrip(".")
    return pairs
