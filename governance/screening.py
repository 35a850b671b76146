"""Screening of untrusted text for instruction-like content. Pure.

A hit does not block anything by itself: it marks the run tainted, and a tainted run cannot
execute a side-effect tool without a human approval.
"""

import re
import unicodedata

# Orders to call tools or to mail someone are normal from the caller, suspicious inside data.
DATA_ONLY = {"tool_order", "exfiltration"}

_PATTERNS = [
    ("override", r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(instructions|rules|prompt|policies|guidelines)\b"),
    ("role_change", r"\byou are now\b|\bact as (an?|the) (admin|administrator|system|developer)\b"),
    ("new_instructions", r"\b(new|updated|real) (instructions|orders|task)\s*:"),
    ("system_prompt", r"\b(system prompt|developer message)\b|<\|?(im_start|system)\|?>"),
    ("tool_order", r"\b(call|invoke|execute|run|use)\s+(the\s+)?(tool\s+)?`?[a-z]+_[a-z_]+`?"),
    ("exfiltration", r"\b(send|forward|email|mail)\b[^.\n]{0,60}\b[\w.+-]+@[\w-]+(\.[\w-]+)+"),
]
_COMPILED = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _PATTERNS]


def _hidden_characters(text: str) -> bool:
    # Unicode tag characters and other invisible format characters smuggle text past readers.
    return any(0xE0000 <= ord(ch) <= 0xE007F or unicodedata.category(ch) == "Cf" for ch in text)


def screen(text: str, *, data: bool = False) -> list[str]:
    """Names of the instruction-like patterns found in `text`; empty when it reads as plain data.

    `data=True` screens text that should hold no orders at all (tool results, documents).
    """
    found = [name for name, pattern in _COMPILED if (data or name not in DATA_ONLY) and pattern.search(text)]
    if _hidden_characters(text):
        found.append("hidden_characters")
    return found
