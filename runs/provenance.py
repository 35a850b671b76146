"""Where a parked call's arguments came from, for the approver's card. Pure.

An approver asked to send a mail to an address wants to know whether that address came from the
caller or from a ticket a customer wrote. So when a call parks, each argument value is looked for
in the untrusted text the run has read (results of untrusted tools, descriptions of tools from
untrusted sources), and the card says where it appeared, with an excerpt. Values are compared as
a reader sees them (NFKC, case folded, UTS #39 skeleton, invisible characters dropped), so a
homoglyph of a ticket's address still matches it.

Addresses and URLs in a side-effect call's arguments are also checked for mixed scripts and
look-alike characters (core.text): `dana.whitfield@exаmple.com` with a Cyrillic `а` reads
as a colleague's address and is not one. Such a call waits for a human whatever the policies say.
"""

import functools
import json
import re
import unicodedata

from governance import redaction
from core.confusables import confusable_findings
from core.text import skeleton

EXCERPT_CHARS = 50  # on each side of the match
MIN_VALUE_CHARS = 4  # shorter values ("P1", "yes") appear everywhere and say nothing
MAX_PLACES = 5  # places shown per argument
_DELIMS = r"\s<>()\[\]{}\"'`,;"
_ADDRESS = re.compile(rf"[^{_DELIMS}@:/]+@[^{_DELIMS}@/]+")
_URL = re.compile(rf"[a-zA-Z][a-zA-Z0-9+.-]*://[^{_DELIMS}]+")


@functools.lru_cache(maxsize=16384)
def _folded(char: str) -> str:
    text = unicodedata.normalize("NFKC", char).casefold()
    return "".join(c for c in skeleton(text).casefold() if unicodedata.category(c) != "Cf")


def _reading(text: str) -> tuple[str, list[int]]:
    """`text` as compared, and for each of its characters the index in `text` it came from."""
    out, where = [], []
    for index, char in enumerate(text):
        folded = _folded(char)
        out.append(folded)
        where += [index] * len(folded)
    return "".join(out), where


def links_in(text: str) -> list[str]:
    """The e-mail addresses and URLs in `text`, in order, each once."""
    found = [m.group(0).rstrip(".") for m in _URL.finditer(text)]
    found += [m.group(0).rstrip(".") for m in _ADDRESS.finditer(text) if "://" not in m.group(0)]
    return list(dict.fromkeys(found))


def _leaves(value, path: str = ""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, str(value)


def flags(arguments: dict) -> list[str]:
    """Why an address or URL in the arguments is not what it looks like, one line each."""
    out = []
    for path, value in _leaves(arguments):
        for link in links_in(value):
            out += [f"argument {path}: {finding}" for finding in confusable_findings(link)]
    return out


def untrusted_texts(state: dict, snapshot: dict) -> list[dict]:
    """The untrusted text this run has read so far, each string with where it came from."""
    untrusted = set(state.get("untrusted_calls", []))
    texts = []
    for message in state["messages"]:
        if message.get("role") != "tool" or message.get("tool_call_id") not in untrusted:
            continue
        try:
            value = json.loads(message["content"])
        except ValueError:
            value = message["content"]
        texts += [{"origin": f"result of {message.get('name', '')}", "tool": message.get("name", ""),
                   "call_id": message["tool_call_id"], "text": text} for _, text in _leaves(value)]
    for name in state.get("untrusted_descriptions", []):
        description = snapshot["tools"].get(name, {}).get("description", "")
        texts.append({"origin": f"description of tool {name}", "tool": name, "call_id": None, "text": description})
    origin = snapshot.get("origin") or {}
    if origin.get("untrusted") and state["messages"]:
        # A webhook run's input is made from its payload: the sender's words, as untrusted as a tool's result.
        texts.append({"origin": f"{origin.get('kind', 'external')} payload of trigger {origin.get('trigger', '?')}",
                      "tool": "", "call_id": None, "text": state["messages"][0].get("content", "")})
    return texts


def _excerpt(text: str, start: int, end: int) -> str:
    left, right = max(0, start - EXCERPT_CHARS), min(len(text), end + EXCERPT_CHARS)
    return ("…" if left else "") + text[left:right] + ("…" if right < len(text) else "")


def _places(value: str, texts: list[tuple[dict, str, list[int]]]) -> list[dict]:
    wanted = [(candidate, _reading(candidate)[0]) for candidate in dict.fromkeys([value, *links_in(value)])]
    places = []
    for source, reading, where in texts:
        for candidate, key in wanted:
            if len(key) < MIN_VALUE_CHARS or (at := reading.find(key)) < 0:
                continue
            start, end = where[at], where[at + len(key) - 1] + 1
            places.append({"origin": source["origin"], "tool": source["tool"], "call_id": source["call_id"],
                           "matched": candidate, "exactly": source["text"][start:end] == candidate,
                           "excerpt": _excerpt(source["text"], start, end)})
            break
        if len(places) >= MAX_PLACES:
            break
    return places


def arguments_provenance(arguments: dict, texts: list[dict]) -> list[dict]:
    """For each argument: whether its value (or an address or URL in it) appeared in untrusted
    text and where, and what is wrong with the addresses and URLs it holds."""
    read = [(source, *_reading(source["text"])) for source in texts]
    rows = []
    for path, value in _leaves(arguments):
        places = _places(value, read)
        found = [finding for link in links_in(value) for finding in confusable_findings(link)]
        rows.append({
            "argument": path,
            "in_untrusted_text": bool(places),
            "places": places,
            "flags": found,
            # What the value really is, when it is not what it looks like: every non-ASCII
            # character spelled out, so the card cannot show a look-alike.
            "spelled_out": value.encode("ascii", "backslashreplace").decode() if found else "",
        })
    return rows


CARD_REDACT = ("api_keys", "card_numbers")  # approvers see addresses (what they decide on), never secrets


def of_approval(approval) -> list[dict]:
    """What the harness found when `approval`'s call parked, as the approver's card shows it:
    read from the run's state (kept there unredacted; the trace's copy is redacted), secrets cut."""
    rows = (approval.run.state or {}).get("provenance", {}).get(approval.call_id, [])
    return redaction.redact(rows, kinds=CARD_REDACT, secrets=redaction.env_secrets())
