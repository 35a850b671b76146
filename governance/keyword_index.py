"""Which of many keywords occur in a text, as whole words: one Aho-Corasick pass, not a loop.

Pure. The automaton only proposes candidates; each candidate is then confirmed with the same
whole-word regular expression the engine has always used (`word_pattern`), so the answer is
exactly the answer of searching every keyword one by one, at the cost of one pass over the
text plus one regex per keyword that actually occurs.

For the automaton never to miss a match, text and keywords are folded the way `re.IGNORECASE`
compares characters: a character's simple lowercase, then one representative for each class
of the extra equivalences `re` knows (ı/i, ſ/s, K/k, ...), and whitespace runs become one space
(a phrase's words match across any run of whitespace). Folding keeps one character per
character, so a regex match always shows up as a substring of the folded text.
"""

import re
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
    folded = text.lower() if text.isascii() else text.translate(_FOLD)
    return " ".join(folded.split())


class KeywordIndex:
    """Built once from a set of keywords; answers which of them occur in a text."""

    def __init__(self, keywords):
        self._by_key: dict[str, list[str]] = {}
        for keyword in dict.fromkeys(keywords):
            key = fold(keyword)
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
        candidates = {key for _, key in self._automaton.iter(fold(text))}
        return frozenset(
            keyword for key in candidates for keyword in self._by_key[key] if self._pattern(keyword).search(text)
        )
