"""Which of many keywords occur in a text, as whole words: one Aho-Corasick pass, not a loop.

Pure. The automaton only proposes candidates, each at a position; a candidate that is not
plainly inside a longer word is confirmed by the same whole-word regular expression the engine
has always used (`word_pattern`), anchored at its position in the text. So the answer is
exactly the answer of searching every keyword one by one, at the cost of one pass over the
text plus one anchored match per candidate.

For the automaton never to miss a match, text and keywords are folded the way `re.IGNORECASE`
compares characters: a character's simple lowercase, then one representative for each class
of the extra equivalences `re` knows (ı/i, ſ/s, K/k, ...), one character for one. Whitespace
runs are scanned as one space (a phrase's words match across any run), and positions are
mapped back to the text for the confirming match.
"""

import re
from bisect import bisect_right
from functools import lru_cache

import ahocorasick

try:  # the tables `re` itself compiles IGNORECASE literals with (CPython 3.11+)
    from _sre import unicode_tolower as _tolower
    from re._casefix import _EXTRA_CASES
except ImportError:  # pragma: no cover - another implementation: fold with str.lower, still confirmed by regex
    _EXTRA_CASES = {}

    def _tolower(code: int) -> int:
        lowered = chr(code).lower()
        return ord(lowered) if len(lowered) == 1 else code


@lru_cache(maxsize=1024)
def word_pattern(phrase: str) -> re.Pattern:
    """Whole words only: "drop" must not match "dropdown". Inner whitespace matches any run."""
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


class _FoldTable(dict):
    """str.translate table, filled on first sight of each character."""

    def __missing__(self, code: int) -> int:
        lower = _tolower(code)
        folded = min((lower, *_EXTRA_CASES.get(lower, ())))
        self[code] = folded
        return folded


_FOLD = _FoldTable()


def fold(text: str) -> str:
    # ASCII folds to its lowercase: an ASCII letter is the smallest member of its class.
    return text.lower() if text.isascii() else text.translate(_FOLD)


# A folded character among these came from a character `\w` matches (letters fold to letters).
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _positions(folded: str):
    """Position in the whitespace-joined text -> position in `folded` (and so in the text)."""
    joined_starts, starts, at = [], [], 0
    for token in re.finditer(r"\S+", folded):
        joined_starts.append(at)
        starts.append(token.start())
        at += token.end() - token.start() + 1

    def to_text(position: int) -> int:
        i = bisect_right(joined_starts, position) - 1
        return starts[i] + position - joined_starts[i]

    return to_text


class KeywordIndex:
    """Built once from a set of keywords; answers which of them occur in a text."""

    def __init__(self, keywords):
        self._by_key: dict[str, list[str]] = {}  # folded, whitespace-joined -> the keywords as given
        for keyword in dict.fromkeys(keywords):
            key = " ".join(fold(keyword).split())
            if key:
                self._by_key.setdefault(key, []).append(keyword)
        self._automaton = None
        if self._by_key:
            self._automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_STRING)
            for key in self._by_key:
                self._automaton.add_word(key, key)
            self._automaton.make_automaton()
        self._patterns: dict[str, re.Pattern] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_key.values())

    def _pattern(self, keyword: str) -> re.Pattern:
        pattern = self._patterns.get(keyword)
        if pattern is None:
            pattern = self._patterns[keyword] = word_pattern.__wrapped__(keyword)
        return pattern

    def found(self, text: str) -> frozenset[str]:
        """The keywords (as given) that occur in `text` as whole words, case-insensitively."""
        if self._automaton is None or not text:
            return frozenset()
        folded = fold(text)
        scanned = " ".join(folded.split())
        to_text = None if scanned == folded else _positions(folded)
        found, last = set(), len(scanned) - 1
        for end, key in self._automaton.iter(scanned):
            start = end - len(key) + 1
            if (start and scanned[start - 1] in _ASCII_WORD) or (end < last and scanned[end + 1] in _ASCII_WORD):
                continue  # inside a longer word: the regex's (?<!\w) or (?!\w) refuses it too
            at = start if to_text is None else to_text(start)
            for keyword in self._by_key[key]:
                if keyword not in found and self._pattern(keyword).match(text, at):
                    found.add(keyword)
        return frozenset(found)
