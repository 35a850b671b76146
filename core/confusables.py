"""Which scripts a text is written in, and why an address or URL may not be what it looks like
(UTS #39: mixed scripts, characters that pass for ASCII ones, invisible characters, punycode).

The script data and the skeletons come from ICU, as in core.text. Pure Python, no Django.
"""

from __future__ import annotations

import functools
import unicodedata
from urllib.parse import urlsplit

import icu

from core.text import skeleton

_COMMON = icu.UScriptCode.COMMON
_INHERITED = icu.UScriptCode.INHERITED
# UTS #39 section 5.1 "augmented script sets": Han mixes with kana (Japanese), Hangul (Korean)
# and Bopomofo (Chinese), so those mixtures are one script as a reader sees them.
_HAN_FAMILY = {
    icu.UScriptCode.HAN: {"Hani", "Hanb", "Jpan", "Kore"},
    icu.UScriptCode.HIRAGANA: {"Hira", "Jpan"},
    icu.UScriptCode.KATAKANA: {"Kana", "Jpan"},
    icu.UScriptCode.HANGUL: {"Hang", "Kore"},
    icu.UScriptCode.BOPOMOFO: {"Bopo", "Hanb"},
}



@functools.lru_cache(maxsize=4096)
def _scripts(char: str) -> frozenset[str] | None:
    """The augmented Script_Extensions of one character; None for Common and Inherited ones,
    which go with any script."""
    codes = icu.Script.getScriptExtensions(char)
    if any(code in (_COMMON, _INHERITED) for code in codes):
        return None
    names: set[str] = set()
    for code in codes:
        names |= _HAN_FAMILY.get(code, {icu.Script(code).getShortName()})
    return frozenset(names)


def scripts_of(text: str) -> list[str]:
    """Script names (Unicode's long ones: "Latin", "Cyrillic") used in ``text``, in order of
    first use, Common and Inherited characters left out."""
    seen: dict[str, None] = {}
    for char in text:
        if _scripts(char) is not None:
            seen.setdefault(icu.Script.getScript(char).getName(), None)
    return list(seen)


def mixed_script(text: str) -> bool:
    """True when ``text`` mixes scripts in a way no single writing system does (UTS #39
    section 5.1: its resolved script set is empty). ``"pаypal"`` with a Cyrillic ``а`` is
    mixed; ``"paypal"``, ``"Москва"``, ``"東京タワー"`` and digits or punctuation alone are not.
    """
    resolved: frozenset[str] | None = None
    for char in text:
        sets = _scripts(char)
        if sets is None:
            continue
        resolved = sets if resolved is None else resolved & sets
        if not resolved:
            return True
    return False


def _label_findings(label: str, *, where: str) -> list[str]:
    findings: list[str] = []
    if label.lower().startswith("xn--"):
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except (UnicodeError, ValueError):
            return [f"{where} {label!r} is punycode that does not decode"]
        inner = _label_findings(decoded, where=where)
        if inner or skeleton(decoded) != decoded:
            findings.append(f"{where} {label!r} is punycode for {decoded!r}")
        return findings + inner
    for char in dict.fromkeys(label):
        if unicodedata.category(char) == "Cf":
            findings.append(f"{where} {label!r} contains the invisible character U+{ord(char):04X}")
    mixed = mixed_script(label)
    if mixed:
        findings.append(f"{where} {label!r} mixes scripts ({', '.join(scripts_of(label))})")
    # A whole label in Cyrillic or Greek is someone's own language unless all of it passes for
    # ASCII ("аррӏе"); next to Latin letters, a single look-alike is the attack.
    latin_or_mixed = mixed or scripts_of(label) == ["Latin"]
    lookalikes = [char for char in dict.fromkeys(label) if _passes_for_ascii(char)]
    if lookalikes and not latin_or_mixed and _as_read(label).isascii():
        findings.append(
            f"{where} {label!r} is written in {', '.join(scripts_of(label))} but reads as "
            f"{_as_read(label)!r}"
        )
    elif lookalikes and latin_or_mixed:
        for char in lookalikes:
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            findings.append(
                f"{where} {label!r} contains {char!r} ({name}), which looks like {skeleton(char)!r}"
            )
    return findings


def _passes_for_ascii(char: str) -> bool:
    if char.isascii() or unicodedata.category(char) == "Cf":
        return False
    looks_like = skeleton(char)
    return looks_like != char and looks_like.isascii()


def _host_findings(host: str, *, where: str) -> list[str]:
    findings: list[str] = []
    for label in host.split("."):
        if label:
            findings += _label_findings(label, where=where)
    return findings


def confusable_findings(value: str) -> list[str]:
    """Why an e-mail address or URL may not be what it looks like, one sentence per reason:
    a label (host part, or the mailbox before ``@``) that mixes scripts, a character that looks
    like a different ASCII one, an invisible character, punycode (``xn--``) that decodes to any
    of those. Empty for a plain ASCII address, and for anything that is neither address nor URL
    but has none of those traits.
    """
    value = value.strip()
    findings: list[str] = []
    if "://" in value:
        try:
            host = urlsplit(value).hostname or ""
        except ValueError:
            host = ""
        findings += _host_findings(host, where="host label")
    elif "@" in value:
        local, _, domain = value.rpartition("@")
        findings += _label_findings(local, where="mailbox")
        findings += _host_findings(domain, where="domain label")
    else:
        findings += _host_findings(value, where="label")
    if findings:
        shown = _as_read(value)
        if shown != value:
            findings.append(f"{value!r} reads as {shown!r}")
    return findings


def _as_read(value: str) -> str:
    """``value`` with each character that passes for an ASCII one replaced by it, and
    invisible ones dropped: what the reader of an approval card believes they see."""
    out = []
    for char in value:
        if char.isascii():
            out.append(char)
        elif unicodedata.category(char) != "Cf":
            out.append(skeleton(char) if _passes_for_ascii(char) else char)
    return "".join(out)
