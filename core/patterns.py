"""Policy regexes, on RE2. Pure.

Python's `re` backtracks: `^(a+)+$` against thirty `a`s and a `!` takes seconds, and each more
character doubles it (issue 24, finding 3). RE2 runs in time linear in the text whatever the
pattern, and refuses, at compile time, the features that need backtracking (backreferences,
lookaround, atomic groups, possessive quantifiers) and programs bigger than its memory budget.
A pattern that does not compile here is refused on save and fails its policy closed at run time.

RE2's `\\w`, `\\d` and `\\b` are ASCII-only; `\\pL`, `\\p{Cyrillic}` and friends are Unicode. A
pattern that uses `\\b` or `\\w` with letters of other scripts is refused: on RE2 it would
silently stop matching what it matched on Python's re.
"""

import re
from functools import lru_cache

import re2

# A policy regex is at most 512 characters (the model field); 1 MiB of compiled program is far
# more than any such pattern needs, and bounds what a crafted one (nested counted repeats) costs.
MAX_PROGRAM_BYTES = 1 << 20

_OPTIONS = re2.Options()
_OPTIONS.case_sensitive = False  # policies have always matched case-insensitively
_OPTIONS.log_errors = False  # a refused pattern is reported to whoever saved it, not to stderr
_OPTIONS.max_mem = MAX_PROGRAM_BYTES

# What RE2 says -> what the author of the policy is told.
_WHY = (
    ("invalid escape sequence: \\1", "backreferences (\\1, \\2, ...) need backtracking"),
    ("invalid escape sequence: \\", "RE2 does not know this escape"),
    ("invalid perl operator: (?=", "lookahead (?=...) needs backtracking"),
    ("invalid perl operator: (?!", "negative lookahead (?!...) needs backtracking"),
    ("invalid perl operator: (?<=", "lookbehind (?<=...) needs backtracking"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!...) needs backtracking"),
    ("invalid perl operator: (?>", "atomic groups (?>...) are not supported"),
    ("bad repetition operator: ++", "possessive quantifiers are not supported"),
    ("bad repetition operator: *+", "possessive quantifiers are not supported"),
    ("bad repetition operator: ?+", "possessive quantifiers are not supported"),
    ("invalid repetition size", "a counted repetition is over RE2's limit of 1000"),
    ("pattern too large", "the compiled pattern is too large"),
)


class PatternError(ValueError):
    """A pattern RE2 cannot run; the message says why, for the person who wrote it."""


@lru_cache(maxsize=2048)
def compile_pattern(pattern: str):
    """The RE2 program for `pattern` (case-insensitive). Raises PatternError."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise PatternError(_reason(pattern, exc)) from None


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a policy regex, or None when it can."""
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        return str(exc)
    escapes = {m.group(1) for m in _ESCAPE.finditer(pattern)}
    if escapes & set("bBwW") and (not pattern.isascii() or escapes & set("pP")):
        # On Python's re, \bзарплата\b matched; on RE2 it never does (no ASCII word character
        # on either side). Refused, so such a policy fails closed instead of matching nothing.
        return ("invalid regex: policy regexes run on RE2, whose \\b and \\w know ASCII letters only, and "
                "this pattern uses them with letters of other scripts; write (?:^|[^\\pL\\pN_]) for a word "
                "boundary and [\\pL\\pN_] for a word character")
    return None


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _reason(pattern: str, exc: Exception) -> str:
    detail = exc.args[0] if exc.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    detail = str(detail)
    if "(?P=" in pattern and "(?P" in detail:
        why = "named backreferences (?P=name) need backtracking"
    else:
        why = next((why for marker, why in _WHY if marker in detail), "it is not valid RE2 syntax")
    return f"invalid regex: policy regexes run on RE2, in linear time, and it cannot run this one: {why} ({detail})"
