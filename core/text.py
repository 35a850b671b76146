"""Text as a person reads it: normalisation for matching and UTS #39 skeletons (the mixed-script
and confusable checks built on them are in core.confusables).

`normalize` gives the views that intent guards, keyword policies, policy regexes and the
injection screen match on, each with a map back to the text as sent, so that a decision quotes
what the person wrote, not the normalised form. Pure Python, no Django.

The confusables table, the script data and the skeleton algorithm come from ICU (PyICU, via
the ``pyicu-wheels`` build that bundles ICU 77 / Unicode 16 data in the wheel), the reference
implementation of Unicode Technical Standard #39. Nothing is downloaded at run time.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import unicodedata

import icu

# One checker for the process: getSkeleton reads immutable data and keeps no per-call state.
_SPOOF = icu.SpoofChecker()
_INHERITED = icu.UScriptCode.INHERITED


_DEFAULT_IGNORABLE = icu.UProperty.DEFAULT_IGNORABLE_CODE_POINT


def _invisible(char: str) -> bool:
    # Format characters (soft hyphen, ZWSP/ZWJ/ZWNJ, bidi controls, tag characters) and the other
    # default-ignorables (variation selectors, the combining grapheme joiner, Hangul fillers):
    # a reader sees nothing, a naive substring match sees a wall.
    return unicodedata.category(char) == "Cf" or icu.Char.hasBinaryProperty(char, _DEFAULT_IGNORABLE)


def _generic_mark(char: str) -> bool:
    # Combining marks of no script of their own (accents, strokes, underlines, zalgo stacks):
    # dropped, so "s̲a̲l̲a̲r̲y̲" and "salary" compare equal. Marks that belong to a script (Indic
    # vowel signs, for one) carry meaning and are kept.
    return unicodedata.category(char) in ("Mn", "Me") and icu.Script.getScript(char).getScriptCode() == _INHERITED


class _Table:
    """A str.translate table for one conversion, filled with the characters of each text before
    it is translated (a plain dict translates faster than one that fills itself on a miss), up
    to a bound: a text of every code point must not grow it to a hundred megabytes."""

    LIMIT = 1 << 16

    def __init__(self, convert):
        self.codes: dict[int, str] = {}
        self._convert = convert
        self._ascii_ready = False

    def translate(self, text: str) -> str:
        return text.translate(self.ready(text))

    def lengths(self, text: str):
        """The length of each character's conversion, in order."""
        return map(len, map(self.ready(text).__getitem__, map(ord, text)))

    def ready(self, text: str) -> dict[int, str]:
        codes = self.codes
        if text.isascii():  # most text: all of ASCII is filled in on first sight
            if not self._ascii_ready:
                codes.update((code, self._convert(chr(code))) for code in range(128))
                self._ascii_ready = True
            return codes
        missing = {ord(c) for c in set(text)} - codes.keys()
        if not missing:
            return codes
        if len(codes) + len(missing) > self.LIMIT:
            codes = dict(codes)  # this text's own copy, dropped after it
        for code in missing:
            codes[code] = self._convert(chr(code))
        return codes


def _plain_char(char: str) -> str:
    return "" if _invisible(char) else unicodedata.normalize("NFKC", char)


def _read_char(char: str) -> str:
    if char.isascii() or _invisible(char):
        return "" if _invisible(char) else char
    out = []
    for part in unicodedata.normalize("NFKD", char):
        if _invisible(part) or _generic_mark(part):
            continue
        out.append(part if part.isascii() else _ascii_lookalike(part) or part)
    return "".join(out)


def _ascii_lookalike(char: str) -> str | None:
    """The ASCII a character passes for, in its own case, or None. Capitals go through their
    small letter: the prototype of Cyrillic "І" is "l" (I, l and 1 are one class), but next to
    other capitals it reads as "I"."""
    if char.isupper():
        small = skeleton(char.lower())
        if small.isascii() and small.isalpha():
            return small.upper()
    looks_like = skeleton(char)
    return looks_like if looks_like != char and looks_like.isascii() else None


def _key_char(char: str) -> str:
    if char.isascii():
        # One ASCII character, one key character: so the key of ASCII text maps back to it by
        # tokens, not by a walk over every character. The three ASCII characters whose skeleton
        # is longer ("m" is "rn", '"' is "''", "%" is "o/o") stand for themselves; look-alikes of
        # them from other scripts are folded onto them.
        key = _skeleton_key(char)
        return " " if key.isspace() else key if len(key) == 1 else char.casefold()
    key = _skeleton_key(char)
    for long, short in _ascii_long().items():
        key = key.replace(long, short)
    return " " if key.isspace() else key


@functools.cache
def _ascii_long() -> dict[str, str]:
    return {key: chr(code) for code in range(128) if len(key := _skeleton_key(chr(code))) > 1}


def _skeleton_key(char: str) -> str:
    if _invisible(char):
        return ""
    key = unicodedata.normalize("NFKD", char)
    # Casefold on both sides of the skeleton: before, so that case never decides (the skeleton
    # of "M" is "M" but of "m" is "rn"); after, because prototypes are often capitals ("O").
    for _ in range(3):  # to a fixed point; one round nearly always is
        previous = key
        key = "".join(c for c in key if not _invisible(c) and not _generic_mark(c)).casefold()
        key = unicodedata.normalize("NFKD", skeleton(key)).casefold()
        key = "".join(c for c in key if not _generic_mark(c))
        if key == previous:
            break
    return key


_PLAIN = _Table(_plain_char)
_READ = _Table(_read_char)
_KEY = _Table(_key_char)
_TABLES = {"plain": _PLAIN, "read": _READ, "key": _KEY}
_SPACES = re.compile(r"\s\s+")  # runs of what str.split() splits on, as re has it for str patterns


class Normalized:
    """One text and its views for matching.

    ``plain``: NFKC, invisible characters removed; case and accents as sent. ``read``: as an
    ASCII reader takes it: plain, with generic combining marks dropped and each character that
    passes for an ASCII one replaced by it (ASCII itself untouched, so digits stay digits).
    ``key``: NFKD with generic combining marks dropped, casefolded, every character replaced by
    its UTS #39 confusable prototype, casefolded again, whitespace runs as one space: two texts
    a reader takes for the same words have the same key (not meant to be read: "0" is "o").
    ``quote(view, start, end)`` is the part of the original text that produced
    ``view[start:end]``, with the invisible characters and marks that trail it.
    """

    __slots__ = ("original", "key", "_views", "_starts")

    def __init__(self, original: str):
        self.original = original
        translated = _KEY.translate(original)
        self.key = " ".join(translated.split())
        # Only regexes read the others: each is made on first use. ASCII text is its own plain
        # and read views.
        self._views: dict[str, str] = {"original": original, "key": self.key}
        if original.isascii():
            self._views["plain"] = self._views["read"] = original
        else:  # kept to quote from: the key before its whitespace runs were collapsed
            self._views["key translated"] = translated
        self._starts: dict = {}

    @property
    def plain(self) -> str:
        return self.view("plain")

    @property
    def read(self) -> str:
        return self.view("read")

    def view(self, name: str) -> str:
        made = self._views.get(name)
        if made is None:
            made = self._views[name] = _TABLES[name].translate(self.original)
        return made

    def quote(self, view: str, start: int, end: int) -> str:
        """The original text behind ``view[start:end]`` (view: "original", "plain", "read" or
        "key")."""
        if self.view(view) is self.original:
            return self.original[start:end]
        if start >= end:
            return ""
        if view == "key" and self.original.isascii():
            if len(self.key) == len(self.original):  # no whitespace run collapsed: one to one
                return self.original[start:end]
            to_original = self._collapsed("ascii key", lambda: self.original)
            return self.original[to_original(start):to_original(end - 1) + 1]
        ends = self._starts.get(view)
        if ends is None:
            # For each original character, where its conversion ends in the view (before the
            # key's whitespace runs are collapsed): a view position's source is a bisection.
            ends = self._starts[view] = list(itertools.accumulate(_TABLES[view].lengths(self.original)))
        first, last = start, end - 1
        if view == "key":
            to_translated = self._collapsed("key translated", lambda: self._views["key translated"])
            first, last = to_translated(first), to_translated(last)
        source = bisect.bisect_right(ends, last)
        # The quote runs on to where the next character that shows starts, so it keeps the marks,
        # invisible characters and the rest of an expanded character ("ﬁ") that end the words.
        if ends[source] < ends[-1]:
            stop = bisect.bisect_right(ends, ends[source])
        else:
            stop = max(len(self.original.rstrip()), source + 1)
        return self.original[bisect.bisect_right(ends, first):stop]

    def _collapsed(self, name: str, make_text):
        """Position in " ".join(text.split()) -> position in ``text`` (made by ``make_text`` on
        first use): the two run parallel, the joined one shifted after each whitespace run
        longer than one (and the leading one)."""
        made = self._starts.get(name)
        if made is not None:
            return made
        text = make_text()
        shift = len(text) - len(text.lstrip())
        breaks, shifts = [0], [shift]
        for run in _SPACES.finditer(text, shift):
            start, end = run.span()
            breaks.append(start - shift + 1)
            shift += end - start - 1
            shifts.append(shift)

        def to_text(position: int) -> int:
            return position + shifts[bisect.bisect_right(breaks, position) - 1]

        self._starts[name] = to_text
        return to_text

@functools.cache
def char_class(unicode_set: str) -> re.Pattern:
    """A compiled regex matching one character of an ICU UnicodeSet (``"[:Cf:]"``,
    ``"[:^ccc=0:]"``): a C-speed test for "does this text hold any of these", where a Python
    loop over the characters would cost a microsecond a character."""
    ranges = icu.UnicodeSet(unicode_set).ranges()
    body = "".join(re.escape(low) if low == high else f"{re.escape(low)}-{re.escape(high)}" for low, high in ranges)
    return re.compile(f"[{body}]")


@functools.lru_cache(maxsize=32)
def normalize(text: str) -> Normalized:
    """The matching views of ``text`` (see Normalized). The last few texts are kept, so the
    engine and the screen, asked about the same input, normalise it once."""
    return Normalized(text)


def fold(text: str) -> str:
    """The key of a short string (a keyword, a phrase): what it is compared by."""
    return " ".join(_KEY.translate(text).split())


def skeleton(text: str) -> str:
    """The UTS #39 skeleton of ``text``: NFD, each character mapped to its confusable
    prototype, NFD again. Two strings a reader can't tell apart have the same skeleton
    (``skeleton("exаmple") == skeleton("example")`` with a Cyrillic ``а``). The skeleton is a
    key for comparing, not text to show: it maps ``m`` to ``rn`` and ``0`` to ``O``.
    """
    return _SPOOF.getSkeleton(0, text)
