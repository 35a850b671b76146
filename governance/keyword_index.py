"""Which of many keywords occur in a text, as whole words: one Aho-Corasick pass, not a loop.

Pure. Text and keywords are compared by their keys (core.text: NFKC, invisible
characters and generic combining marks gone, casefolded, confusables mapped to their UTS #39
prototype, whitespace runs as one space), so "ＳＡＬＡＲＹ", "ѕаlаrу" (Cyrillic) and "sal\\u00adary"
are all the keyword "salary", and a phrase's words match across any run of whitespace. The
text is normalised once however many policies look at it; the automaton then proposes each
occurrence, and one that is inside a longer word ("drop" in "dropdown") is dropped.
"""

import ahocorasick

from core.text import Normalized, fold, normalize


def _is_word(char: str) -> bool:
    # What `\w` is to Python's re on str: letters, digits of any script, and the underscore.
    return char.isalnum() or char == "_"


def _whole_word(key: str, start: int, end: int) -> bool:
    """Whether key[start:end] stands alone: no word character just before or just after."""
    return not ((start and _is_word(key[start - 1])) or (end < len(key) and _is_word(key[end])))


def occurs(text: Normalized, keyword: str) -> tuple[int, int] | None:
    """Where `keyword` first occurs in `text` as a whole word (a span of text.key), or None.
    One keyword at a time: what the index answers for many at once."""
    wanted = fold(keyword)
    if not wanted:
        return None
    at = text.key.find(wanted)
    while at != -1:
        if _whole_word(text.key, at, at + len(wanted)):
            return at, at + len(wanted)
        at = text.key.find(wanted, at + 1)
    return None


class KeywordIndex:
    """Built once from a set of keywords; answers which of them occur in a text."""

    def __init__(self, keywords):
        self._by_key: dict[str, list[str]] = {}  # key -> the keywords as given
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

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_key.values())

    def found(self, text: "str | Normalized") -> dict[str, tuple[int, int]]:
        """The keywords (as given) that occur in `text` as whole words, each with the span of
        its first occurrence in the text's key (``Normalized.quote("key", ...)`` gives the
        words as sent)."""
        if isinstance(text, str):
            text = normalize(text)
        key = text.key
        if self._automaton is None or not key:
            return {}
        found: dict[str, tuple[int, int]] = {}
        seen: set[str] = set()
        for end, hit in self._automaton.iter(key):
            start = end - len(hit) + 1
            if hit in seen or not _whole_word(key, start, end + 1):
                continue
            seen.add(hit)
            for keyword in self._by_key[hit]:
                found[keyword] = (start, end + 1)
        return found
