"""Encoded layers the screen peels off before it reads: URL-encoding, HTML entities, JSON string
escapes, and base64 (of text, or of gzip, zlib or raw deflate). Pure.

Each layer is peeled from what the one before it gave, at most MAX_DEPTH deep, and everything is
bounded: a layer is never longer than what it came from except when inflated, an inflated stream
stops at MAX_INFLATED bytes, and all inflating of one text stops at MAX_INFLATED_TOTAL, so a
decompression bomb costs what its cap allows and no more.

`peel` also says whether a layer was smuggled: an encoding a person cannot read (letters written
as entities or escapes, a sentence percent-encoded outside any URL, base64 or a compressed stream)
that decodes to readable words. Encoding that normal text carries (``Tom &amp; Jerry``, a URL's
query string, an é as ``\\u00e9``, a token or digest in base64) is peeled for the phrases it may
hide, but is no signal by itself.
"""

import base64
import binascii
import html
import re
import urllib.parse
import zlib

MAX_DEPTH = 3
MAX_LAYERS = 64
MAX_INFLATED = 64 * 1024
MAX_INFLATED_TOTAL = 256 * 1024

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PERCENT_TOKEN = re.compile(r"\S*%[0-9A-Fa-f]{2}\S*")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_NUMERIC_ENTITY = re.compile(r"&#(?:([0-9]{1,7})|[xX]([0-9A-Fa-f]{1,6}));?")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2})|([nrtbf\"'/\\]))")
_SURROGATES = re.compile("[\ud800-\udfff]")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_WORD = re.compile(r"[A-Za-z]{2,}")
_SPACE = re.compile(r"\s")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
# Letters or digits written as codes: no editor or serializer does that to ordinary text.
_SMUGGLED_CODES = 8


def peel(text: str) -> tuple[list[str], bool]:
    """The texts under `text`'s encoded layers (outermost first), and whether any was smuggled."""
    budget = {"inflated": MAX_INFLATED_TOTAL, "layers": MAX_LAYERS}
    found: list[str] = []
    smuggled = False
    todo = [(text, 0)]
    while todo:
        current, depth = todo.pop(0)
        if depth >= MAX_DEPTH:
            continue
        for layer, signal in _layers(current, budget):
            if budget["layers"] <= 0:
                return found, smuggled
            budget["layers"] -= 1
            smuggled = smuggled or signal
            if layer not in found and layer != text:
                found.append(layer)
                todo.append((layer, depth + 1))
    return found, smuggled


def _layers(text: str, budget: dict):
    """(decoded text, smuggled) for each encoding found in `text`, one level down."""
    if _PERCENT.search(text):
        part = _around(text, _PERCENT)
        yield urllib.parse.unquote_plus(part), any(_smuggled_percent(m.group(0)) for m in _PERCENT_TOKEN.finditer(part))
    if "&" in text and _ENTITY.search(text):
        part = _around(text, _ENTITY)
        letters = sum(1 for m in _NUMERIC_ENTITY.finditer(part) if _code_is_alnum(m))
        decoded = html.unescape(part)
        yield decoded, letters >= _SMUGGLED_CODES and readable(decoded)
    if "\\" in text and _ESCAPE.search(text):
        part = _around(text, _ESCAPE)
        letters = sum(1 for m in _ESCAPE.finditer(part) if _escape_is_alnum(m))
        decoded = _unescaped(part)
        yield decoded, letters >= _SMUGGLED_CODES and readable(decoded)
    for match in _B64.finditer(text):
        decoded = _base64_text(match.group(0), budget)
        if decoded:
            yield decoded, readable(decoded)


# Decoded with CONTEXT characters either side, not the whole text: an order that runs from the
# encoded part into the plain one is still read whole, and one URL in a long text costs little.
CONTEXT = 120


def _around(text: str, pattern: re.Pattern) -> str:
    codes = list(pattern.finditer(text))
    start, end = max(codes[0].start() - CONTEXT, 0), codes[-1].end() + CONTEXT
    if start:  # from a whitespace, so no token is cut in two
        start = max(max(text.rfind(space, 0, start) for space in " \n\t"), 0)
    space = _SPACE.search(text, end)
    return text[start:space.start() if space else len(text)]


def readable(text: str) -> bool:
    """Whether `text` reads as words (a sentence or more), not as a code or a token."""
    words = _WORD.findall(text)
    if len(words) < 4 or sum(1 for ch in text if ch.isspace()) < 3:
        return False
    return sum(len(word) for word in words) + text.count(" ") >= 0.7 * len(text)


def _smuggled_percent(token: str) -> bool:
    # A URL's path or query string is percent-encoded by design; a sentence written that way
    # anywhere else is meant not to be read.
    if "://" in token or token.startswith(("www.", "/")) or any(ch in token for ch in "?=&"):
        return False
    return len(_PERCENT.findall(token)) >= 3 and readable(urllib.parse.unquote_plus(token))


def _code_is_alnum(match: re.Match) -> bool:
    decimal, hexadecimal = match.group(1), match.group(2)
    if decimal is None and hexadecimal is None:
        return False
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    return code < 128 and chr(code).isalnum()


def _escape_is_alnum(match: re.Match) -> bool:
    code = match.group(1) or match.group(2)
    return code is not None and int(code, 16) < 128 and chr(int(code, 16)).isalnum()


def _unescaped(text: str) -> str:
    def one(match: re.Match) -> str:
        code, byte, simple = match.groups()
        if code is not None:
            return chr(int(code, 16))
        if byte is not None:
            return chr(int(byte, 16))
        return _SIMPLE.get(simple, simple)

    decoded = _ESCAPE.sub(one, text)
    if _SURROGATES.search(decoded):  # \ud83d\ude00: a pair is one character, a lone half is dropped
        decoded = decoded.encode("utf-16", "surrogatepass").decode("utf-16", "ignore")
    return decoded


def _base64_text(token: str, budget: dict) -> str:
    altchars = b"-_" if "-" in token or "_" in token else None
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=altchars)
    except (ValueError, binascii.Error):
        return ""
    try:  # strictly text: no compressed stream is valid UTF-8 for long
        return _as_text(raw.decode("utf-8").encode())
    except UnicodeDecodeError:
        pass
    inflated = _inflated(raw, budget)
    return (_as_text(inflated) if inflated else "") or _as_text(raw)


def _inflated(raw: bytes, budget: dict) -> bytes:
    """`raw` decompressed if it is a gzip, zlib or raw deflate stream, cut at the caps; a stream
    cut short gives what it held up to there."""
    if budget["inflated"] <= 0 or len(raw) < 8:
        return b""
    if raw[:2] == b"\x1f\x8b":
        formats = [31]
    elif raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0:
        formats = [15]
    else:
        formats = [-15]
    for wbits in formats:
        try:
            out = zlib.decompressobj(wbits).decompress(raw, min(MAX_INFLATED, budget["inflated"]))
        except zlib.error:
            continue
        budget["inflated"] -= len(out)
        return out
    return b""


def _as_text(raw: bytes) -> str:
    """The bytes as text when they read as text (mostly printable), else ''."""
    plain = raw.decode("utf-8", "ignore")
    printable = sum(1 for ch in plain if ch.isprintable() or ch in "\n\t\r")
    return plain if len(plain) >= 6 and printable >= 0.9 * len(plain) else ""
