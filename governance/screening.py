"""Screening of untrusted text for instruction-like content. Pure.

A hit does not block anything by itself: it marks the run tainted, and a tainted run cannot
execute a side-effect tool without a human approval. A false positive therefore costs one
approval, a miss can cost an unreviewed side effect, so the screen leans towards flagging.

Besides plain phrasing it looks through the usual disguises (see garak's encoding probes):
base64/32/16, ascii85, quoted-printable, ROT13, Atbash, leetspeak, Morse, NATO spelling,
Braille, zalgo marks, letters spaced out, text written backwards, and ASCII smuggled in Unicode
tag characters or variant selectors; and it peels encoded layers off (governance.layers:
URL-encoding, HTML entities, JSON escapes, base64 of text or of gzip/zlib/deflate, nested a few
deep, bounded). Text outside ASCII is also read as a person reads it (core.text:
NFKC, so fullwidth letters are letters; invisible characters gone; Cyrillic or Greek
lookalikes read as the Latin letters they pass for), and the ASCII decoders run on that
reading too. A disguised order is reported under its own name plus `encoded_text`, and so is
an encoded layer that hides readable words even when they hold no order: obfuscation inside a
request is itself the signal, and it costs one approval.
"""

import base64
import binascii
import quopri
import re
import unicodedata

from governance.layers import peel
from core.memo import DigestMemo, digest
from core.confusables import mixed_script
from core.text import char_class, normalize

# Orders to call tools or to mail someone are normal from the caller, suspicious inside data.
DATA_ONLY = {"tool_order", "exfiltration", "destructive_order", "markdown_exfil"}

_PATTERNS = [
    ("override", r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(instructions|rules|prompt|policies|guidelines|directions)\b"
                 # the same order without those words: "set aside what you were told before"
                 r"|\b(ignore|disregard|forget|set aside|put aside|throw out)\s+(all of\s+)?(what|everything|anything) you"
                 r"('ve| have|'d| had)?( been| were)? (told|given|asked)\b[^.\n]{0,20}\b(before|earlier|previously|so far|until now)\b"),
    ("role_change", r"\byou are now\b|\bact as (an?|the) (admin|administrator|system|developer)\b"),
    ("new_instructions", r"\b(new|updated|real) (instructions|orders|task)\s*:"),
    ("system_prompt", r"\b(system prompt|developer message)\b|<\|?(im_start|system)\|?>"),
    ("tool_order", r"\b(call|invoke|execute|run|use)\s+(the\s+)?(tool\s+)?`?[a-z]+_[a-z_]+`?"),
    ("exfiltration", r"\b(send|forward|email|mail)\b[^.\n]{0,60}\b[\w.+-]+@[\w-]+(\.[\w-]+)+"),
    ("destructive_order", r"\b(delete|remove|drop|wipe|erase|purge|close)\b[^.\n]{0,40}\baccounts?\b"),
    ("markdown_exfil", r"!\[[^\]\n]*\]\s*[(\[]|\]\s*:\s*https?://|\]\(\s*(https?|javascript|data):"),
]
_COMPILED = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _PATTERNS]
# All of them in one alternation (with data=True, and without the data-only ones): one pass
# tells whether any matches, which for most text is all there is to know.
_ANY = {data: re.compile("|".join(f"(?:{pattern})" for name, pattern in _PATTERNS if data or name not in DATA_ONLY),
                         re.IGNORECASE) for data in (True, False)}

MAX_SCREENED_CHARS = 200_000


def screen(text: str, *, data: bool = False) -> list[str]:
    """Names of the instruction-like patterns found in `text`; empty when it reads as plain data.

    `data=True` screens text that should hold no orders at all (tool results, documents).
    """
    text = text[:MAX_SCREENED_CHARS]
    # Most text is ASCII, where the Unicode disguises (tag characters, variant selectors,
    # Braille, combining marks, other scripts) cannot occur: their scans are skipped.
    ascii_only = text.isascii()
    found = _patterns(text, data)
    decodings, smuggled = _decodings(text, ascii_only)
    decoded = [d for d in decodings if d and d != text]
    hidden = not ascii_only and _hidden_characters(text)
    encoded = hidden or smuggled or _opaque(text, ascii_only) or _disguised_words(text, ascii_only)
    # A disguised order is suspicious whoever sends it, so decoded text is screened as data;
    # only what the disguise added counts (leetspeak of a plain request is still that request).
    plain_hits = found if data else _patterns(text, True)
    for plain in decoded:
        hits = [name for name in _patterns(plain, True) if name not in plain_hits]
        if hits:
            encoded = True
            found += [name for name in hits if name not in found]
    if encoded and not hidden:
        found.append("encoded_text")
    if hidden:
        found.append("hidden_characters")
    return found


# Text that comes back unchanged (tool descriptions and skill bodies of a frozen snapshot, the
# short strings of tool results: keys, names, codes, statuses) is screened once per process, its
# findings kept under the text's digest, not the text (it may be personal data).
SHORT_SCREENED_CHARS = 256
_findings = DigestMemo(limit=8192)


def _remembered(text: str, data: bool) -> tuple[str, ...]:
    key = (digest(text), data)
    found = _findings.get(key)
    if found is None:
        found = tuple(screen(text, data=data))
        _findings.keep(key, found)
    return found


def screen_known(text: str, *, data: bool = False) -> list[str]:
    """`screen` for text that comes back unchanged run after run (tool descriptions and skill
    bodies of a frozen snapshot): each text is screened once per process. Same answer."""
    return list(_remembered(text, data))


def screen_value(value, *, data: bool = True) -> list[str]:
    """`screen` over every string inside a JSON-like value (a tool envelope), findings merged."""
    found: list[str] = []
    for text in strings_in(value):
        hits = _remembered(text, data) if len(text) <= SHORT_SCREENED_CHARS else screen(text, data=data)
        found += [name for name in hits if name not in found]
    return found


def _patterns(text: str, data: bool) -> list[str]:
    if not _ANY[data].search(text):
        return []
    return [name for name, pattern in _COMPILED if (data or name not in DATA_ONLY) and pattern.search(text)]


def strings_in(value):
    """Every string in a JSON-like value, keys included (redaction walks values the same way)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


# --- hidden and opaque text ----------------------------------------------------------------


# Character classes tested at C speed (each is one regex search over the text, not a Python
# loop over its characters); the tag characters are format characters too.
_FORMAT = char_class("[:Cf:]")
_VARIANT_SELECTOR = re.compile("[\uFE00-\uFE0F\U000E0100-\U000E01EF]")
_COMBINING = char_class("[:^ccc=0:]")
_TAG = re.compile("[\U000E0001-\U000E007F]")
_BRAILLE_CELL = re.compile("[\u2800-\u28FF]")


def _count(pattern: re.Pattern, text: str, enough: int) -> bool:
    """Whether `pattern` occurs at least `enough` times in `text` (stops counting there)."""
    for seen, _ in enumerate(pattern.finditer(text), start=1):
        if seen >= enough:
            return True
    return False


def _hidden_characters(text: str) -> bool:
    # Unicode tag characters, variant selectors and other invisible format characters smuggle
    # text past a human reader. One variant selector after an emoji is normal; runs are not.
    return bool(_FORMAT.search(text)) or _count(_VARIANT_SELECTOR, text, 4)


_EMOJI_RUN = re.compile(r"[\U0001F000-\U0001FAFF\u2600-\u27BF]{8,}")


def _opaque(text: str, ascii_only: bool = False) -> bool:
    """Text a reader cannot read but a model may: Braille, emoji runs, stacks of combining marks,
    long tokens mixing several scripts (base2048 and the like)."""
    # Long Morse or NATO-alphabet runs: a reader sees noise, a model spells it out.
    if _LONG_MORSE.search(text) or _LONG_NATO.search(text):
        return True
    if ascii_only:
        return False
    if _count(_BRAILLE_CELL, text, 8):
        return True
    if _EMOJI_RUN.search(text.replace(" ", "")):
        return True
    if _count(_COMBINING, text, 12):
        return True
    for token in text.split():
        if len(token) >= 12 and len({_script(ch) for ch in token if not ch.isascii()}) >= 3:
            return True
    return False


_FULLWIDTH_WORD = re.compile("[\uFF21-\uFF3A\uFF41-\uFF5A]{2,}")
_MIXED_TOKEN = re.compile(r"\S*[A-Za-z]\S*")


def _disguised_words(text: str, ascii_only: bool = False) -> bool:
    """Words a person reads but that are not written as words: spelled out letter by letter,
    in fullwidth forms, or with look-alike letters of another script inside Latin words. One
    such word is a style or a name; a sentence of them is a disguise."""
    for run in _SPACED_RUN.finditer(text):
        words = [w for w in re.split(r"[ \t]{2,}", run.group(0)) if len(w.replace(" ", "")) >= 2]
        if len(words) >= 3 and len(run.group(0).replace(" ", "")) >= 12:
            return True
    if ascii_only:
        return False
    if _count(_FULLWIDTH_WORD, text, 4):
        return True
    mixed = 0
    for token in _MIXED_TOKEN.findall(text):
        if not token.isascii() and any(ch.isalpha() and not ch.isascii() for ch in token) and mixed_script(token):
            mixed += 1
            if mixed >= 2:
                return True
    return False


def _script(ch: str) -> str:
    return unicodedata.name(ch, "UNKNOWN").split(" ")[0]


# --- decoders ------------------------------------------------------------------------------

_B32 = re.compile(r"[A-Z2-7]{16,}=*")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){8,}")
_A85 = re.compile(r"\S{20,}")
_QP = re.compile(r"=[0-9A-F]{2}")
_MORSE = re.compile(r"(?:[.\-]{1,7}[ /]+){6,}[.\-]{1,7}")
_NATO_WORDS = (
    "alfa alpha bravo charlie delta echo foxtrot golf hotel india juliett juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray x-ray yankee zulu"
).split()
_NATO = re.compile(r"\b(?:(?:" + "|".join(_NATO_WORDS) + r")\b[\s,]*){6,}", re.IGNORECASE)
_LONG_MORSE = re.compile(r"(?:[.\-]{1,7}[ /]+){15,}")
_LONG_NATO = re.compile(r"\b(?:(?:" + "|".join(_NATO_WORDS) + r")\b[\s,]*){10,}", re.IGNORECASE)
_UU_LINE = re.compile(r"(?m)(?:^|:\s)([!-`][ -`]{4,60})\s*$")
_MORSE_CODE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h",
    "..": "i", ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p",
    "--.-": "q", ".-.": "r", "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x",
    "-.--": "y", "--..": "z", "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4",
    ".....": "5", "-....": "6", "--...": "7", "---..": "8", "----.": "9", ".-.-.-": ".", "--..--": ",",
    ".--.-.": "@", "..--.-": "_", "-..-.": "/", "---...": ":",
}
# Grade-1 Braille: dots 1-6 as bits 0-5 of the pattern's offset from U+2800.
_BRAILLE = dict(zip(
    [0x01, 0x03, 0x09, 0x19, 0x11, 0x0B, 0x1B, 0x13, 0x0A, 0x1A, 0x05, 0x07, 0x0D, 0x1D, 0x15, 0x0F,
     0x1F, 0x17, 0x0E, 0x1E, 0x25, 0x27, 0x3A, 0x2D, 0x3D, 0x35],
    "abcdefghijklmnopqrstuvwxyz",
))
_LEET = str.maketrans({"4": "a", "3": "e", "1": "i", "0": "o", "5": "s", "7": "t", "@": "a", "$": "s"})
_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
_ATBASH = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba",
)


def _decodings(text: str, ascii_only: bool = False) -> tuple[list[str], bool]:
    """Readable texts hidden in `text`, one per disguise that yields any, and whether a disguise
    hid readable words (an encoded layer that a person cannot read, a line written backwards)."""
    out = []
    read = text
    if not ascii_only:  # each of these needs characters outside ASCII to yield anything
        if _COMBINING.search(text):
            out.append(_COMBINING.sub("", text))
        if _TAG.search(text):
            out.append("".join(chr(ord(ch) - 0xE0000) for ch in _TAG.findall(text)))
        out.append(_variant_selectors(text))
        out.append(_braille(text))
        # What a person reads (lookalikes, fullwidth, invisible characters undone) is screened
        # as it is, and the ASCII decoders run on it instead of the raw text (its ASCII is the
        # same, and base64 broken up by zero-width spaces is whole again).
        read = normalize(text).read
        if read != text:
            out.append(read)
    out += _ascii_decodings(read)
    layers, smuggled = peel(read)
    for layer in layers:
        # A layer can hold any disguise in turn (entities of look-alike letters, base64 of ROT13).
        layer_read = layer if layer.isascii() else normalize(layer).read
        # A short layer (one base64 token) may be in any disguise; a long one (the whole text
        # with its escapes undone) is read as it is, and backwards: the rest would cost a pass
        # over the whole text for each disguise, for orders encoded twice in two different ways.
        out += [layer, layer_read] + (_ascii_decodings(layer_read) if len(layer_read) <= SHORT_LAYER_CHARS
                                      else [_backwards(layer_read)])
        smuggled = smuggled or _reads_backwards(layer_read)
    return [plain for plain in dict.fromkeys(out) if plain], smuggled or _reads_backwards(read)


def _ascii_decodings(text: str) -> list[str]:
    out = [text.translate(_ROT13), text.translate(_ATBASH), text.translate(_LEET), _despaced(text), _backwards(text)]
    out += [_morse(m.group(0)) for m in _MORSE.finditer(text)]
    out += ["".join(w[0] for w in re.findall(r"[A-Za-z-]+", m.group(0))) for m in _NATO.finditer(text)]
    if len(_QP.findall(text)) >= 3:
        out.append(_bytes_text(lambda: quopri.decodestring(text.encode("utf-8", "ignore"))))
    for match in _B32.finditer(text):
        token = match.group(0).rstrip("=")
        out.append(_bytes_text(lambda: base64.b32decode(token + "=" * (-len(token) % 8))))
    for match in _HEX.finditer(text):
        out.append(_bytes_text(lambda: bytes.fromhex(match.group(0))))
    for match in _A85.finditer(text):
        token = match.group(0).encode("ascii", "ignore")
        out.append(_bytes_text(lambda: base64.a85decode(token)))
        out.append(_bytes_text(lambda: base64.b85decode(token)))
    uu = [m.group(1) for m in _UU_LINE.finditer(text)]
    if uu:
        out.append(_bytes_text(lambda: b"".join(binascii.a2b_uu(line) for line in uu)))
    return out


# "i g n o r e   a l l" (letters one space apart, words two or more) and "i-g-n-o-r-e" (one
# separator between letters, the same throughout a word): a reader joins the letters up.
_SPACED_RUN = re.compile(r"(?<!\S)\S(?:[ \t]+\S(?!\S)){3,}")
_SEPARATED_WORD = re.compile(r"(?<![\w.*|-])[A-Za-z0-9]([-.*_|])[A-Za-z0-9](?:\1[A-Za-z0-9]){2,}(?![\w.*|-])")


def _despaced(text: str) -> str:
    joined = _SEPARATED_WORD.sub(lambda m: m.group(0).replace(m.group(1), ""), text)
    joined = _SPACED_RUN.sub(lambda m: " ".join(w.replace(" ", "").replace("\t", "")
                                                for w in re.split(r"[ \t]{2,}", m.group(0))), joined)
    return joined if joined != text else ""


# Words that fill any English sentence and that written backwards are no word in English or in
# the languages near it ("is", "an", "at" are left out: "si", "na", "ta" are Spanish, Polish and
# Slovak words): a line where they only appear backwards was written backwards.
_FUNCTION_WORDS = frozenset("the to and of with for you your this that from have will all please our by be".split())
_BACKWARDS = re.compile(r"\b(?:" + "|".join(word[::-1] for word in _FUNCTION_WORDS) + r")\b", re.IGNORECASE)
_LATIN_WORD = re.compile(r"[a-z]+")


# The words the patterns are made of, written backwards: only text holding one is worth reading
# backwards. Substring tests: one regex alternation of them would cost more than the patterns.
_BACKWARDS_HINTS = tuple(word[::-1] for word in (
    "ignore disregard forget override instruction rules prompt polic guideline aside told "
    "system developer orders task call invoke execute send forward email mail "
    "delete remove drop wipe erase purge close account").split())
SHORT_LAYER_CHARS = 1024


def _backwards(text: str) -> str:
    lower = text.lower()
    return text[::-1] if any(hint in lower for hint in _BACKWARDS_HINTS) else ""


# Words that fill any English sentence and that written backwards are no word in English or in
# the languages near it ("is", "an", "at" are left out: "si", "na", "ta" are Spanish, Polish and
# Slovak words): a line where they only appear backwards was written backwards.
_FUNCTION_WORDS = frozenset("the to and of with for you your this that from have will all please our by be".split())
_BACKWARDS = re.compile(r"\b(?:" + "|".join(word[::-1] for word in _FUNCTION_WORDS) + r")\b", re.IGNORECASE)
_RARE_BACKWARDS = ("eht", "htiw", "uoy", "siht", "taht", "morf", "evah", "lliw", "esaelp")
_LATIN_WORD = re.compile(r"[a-z]+")


def _reads_backwards(text: str) -> bool:
    lower = text.lower()
    if sum(1 for word in _RARE_BACKWARDS if word in lower) < 2:  # nearly all text stops here
        return False
    for line in text.splitlines():
        backward = len(_BACKWARDS.findall(line))
        if backward >= 3:
            forward = sum(1 for word in _LATIN_WORD.findall(line.lower()) if word in _FUNCTION_WORDS)
            if backward > 2 * forward:
                return True
    return False


def _bytes_text(decode) -> str:
    """The decoded bytes as text when they read as text (mostly printable), else ''."""
    try:
        raw = decode()
    except (ValueError, binascii.Error):
        return ""
    plain = raw.decode("utf-8", "ignore")
    printable = sum(1 for ch in plain if ch.isprintable() or ch in "\n\t")
    return plain if len(plain) >= 6 and printable >= 0.9 * len(plain) else ""


def _morse(code: str) -> str:
    words = re.split(r"\s*/\s*|\s{2,}", code.strip())
    return " ".join("".join(_MORSE_CODE.get(letter, "") for letter in word.split()) for word in words)


def _braille(text: str) -> str:
    if not _count(_BRAILLE_CELL, text, 8):
        return ""
    cells = [ch for ch in text if 0x2800 <= ord(ch) <= 0x28FF or ch == " "]
    if sum(1 for ch in cells if ch != " ") < 8:
        return ""
    return "".join(" " if ch == " " else _BRAILLE.get(ord(ch) - 0x2800, "") for ch in cells)


def _variant_selectors(text: str) -> str:
    # One byte per selector: U+FE00-FE0F carry 0-15, U+E0100-E01EF carry 16-255.
    if not _count(_VARIANT_SELECTOR, text, 4):
        return ""
    values = []
    for ch in _VARIANT_SELECTOR.findall(text):
        if 0xFE00 <= ord(ch) <= 0xFE0F:
            values.append(ord(ch) - 0xFE00)
        elif 0xE0100 <= ord(ch) <= 0xE01EF:
            values.append(ord(ch) - 0xE0100 + 16)
    return bytes(values).decode("utf-8", "ignore") if len(values) >= 4 else ""
