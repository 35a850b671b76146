"""RFC 8785 JSON Canonicalization Scheme: one byte string per JSON value, checkable in any language.

Hand-written because the only PyPI implementation is a test-time oracle we compare against
(tests/evidence/test_jcs.py); the verifier must run with nothing but ``cryptography``.
"""

import json
import math
import re

# I-JSON numbers are IEEE doubles: past Number.MAX_SAFE_INTEGER another implementation may round
# (2**53 + 1 reads back as 2**53), so such integers are refused, as the rfc8785 package does.
MAX_SAFE_INTEGER = 2**53 - 1

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), "\\u%04x" % _code)


class CanonicalizationError(ValueError):
    """The value has no RFC 8785 form (NaN, a huge integer, a lone surrogate, a non-JSON type)."""


def canonicalize(value) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value (dict, list, str, int, float, bool, None)."""
    fast = _encoded_by_python(value)
    if fast is not None:
        return fast.encode("utf-8")
    parts: list[str] = []
    _emit(value, parts)
    return "".join(parts).encode("utf-8")


def _emit(value, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalizationError(f"integer {value} is outside +-(2**53 - 1) and has no exact JSON number")
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(number(value))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
        # Sorting the UTF-16BE encodings compares UTF-16 code units, as the RFC asks (it differs
        # from code point order only between astral characters and U+E000..U+FFFF).
        items = sorted(value.items(), key=lambda item: _utf16(item[0]))
        out.append("{")
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _emit(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"{type(value).__name__} is not a JSON type")


def _utf16(text: str) -> bytes:
    try:
        return text.encode("utf-16-be")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError("string holds a lone surrogate") from exc


def _string(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError("string holds a lone surrogate") from exc
    if text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def number(value: float) -> str:
    """ECMAScript Number.prototype.toString of a double (RFC 8785 section 3.2.2.3)."""
    if math.isnan(value) or math.isinf(value):
        raise CanonicalizationError(f"{value} is not a JSON number")
    if value == 0:
        return "0"  # -0 too, as ECMAScript prints it
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip, which is what ECMAScript asks for.
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # n: the position of the decimal point relative to the first significant digit.
    point = len(whole) + (int(exp) if exp else 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * (-point) + digits
    else:
        e = point - 1
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


# Where Python's own encoder (sorted keys, no ASCII escaping, compact separators) can differ from
# RFC 8785: exponents ("1e-07", "1e+16") and integral floats ("100.0") print differently, big
# integers must be refused, keys with astral characters sort differently from keys with
# U+E000..U+FFFF, and a lone surrogate has no UTF-8 form. Other floats print alike: both pick the
# shortest digits that read back. Text free of these is checked at C speed; outside its strings
# (every other piece between quotes, when no quote is escaped) an "e" can only be in true, false
# or an exponent. Plain substring tests: an alternation regex costs more than the encoding.
_BIG_INT = re.compile(r"\d{16}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_HIGH_BMP = re.compile("[\ue000-\uffff]")
_MISSING = object()


def _json_int(literal: str):
    number = int(literal)
    # JSON numbers are doubles: a literal past the safe range means the double it rounds to, which
    # is how RFC 8785 prints large floats such as 1e20.
    return number if abs(number) <= MAX_SAFE_INTEGER else float(literal)


def loads(text: str):
    """json.loads reading integer literals past +-(2**53 - 1) as the doubles they denote."""
    return json.loads(text, parse_int=_json_int)


def _python_form_is_canonical(text: str) -> bool:
    if '\\"' in text:
        return False
    outside = "".join(text.split('"')[::2])
    words = outside.replace("true", "").replace("false", "")
    if "e" in words or "E" in words or _BIG_INT.search(outside):
        return False
    if "." in outside and (".0," in outside or ".0}" in outside or ".0]" in outside or outside.endswith(".0")):
        return False
    if not text.isascii():
        if _SURROGATE.search(text) or (_ASTRAL.search(text) and _HIGH_BMP.search(text)):
            return False
    return True


def _encoded_by_python(value) -> str | None:
    """Python's C encoding of value when it is provably the RFC 8785 form, else None."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    if not _python_form_is_canonical(text):
        return None
    # Python's encoder quietly turns 1 or True as a key into "1" or "true", and a tuple into a
    # list; reading the text back tells: such a value no longer compares equal.
    try:
        if json.loads(text) != value:
            return None
    except RecursionError:
        return None
    return text


def is_canonical(text: str, value=_MISSING) -> bool:
    """Whether JSON text is exactly its own RFC 8785 form (False for text that is not JSON).

    `value`: the text already parsed with `loads`, to spare a second parse.
    """
    if value is _MISSING:
        try:
            value = loads(text)
        except (ValueError, RecursionError):
            return False
    try:
        fast = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return False
    if fast == text and _python_form_is_canonical(fast):
        return True
    try:
        return canonicalize(value) == text.encode("utf-8")
    except (CanonicalizationError, UnicodeEncodeError, RecursionError):
        return False
