"""warrant_verify.jcs against the rfc8785 package (an independent RFC 8785 implementation)."""

import json

import pytest
import rfc8785

from warrant_verify.jcs import CanonicalizationError, canonicalize, number

FLOATS = [
    1e21, 1e-7, 0.1, -0.0, 0.0, 5e-324, 1e20, 1e22, 123.456, -1.5e300, 1.7976931348623157e308,
    1e-6, -1e-6, 2.5e-5, 0.000001234, 333333333.33333329, 4.35, 0.3, 100.0, 9007199254740992.0,
    2.2250738585072014e-308, 1.0000000000000002, 123456789012345680000.0, 0.1 + 0.2, -7.0, 1e-300,
]

CORPUS = [
    None, True, False, 0, -1, 2**53 - 1, -(2**53 - 1), "", "plain", [], {}, [[], {}],
    {"b": 1, "a": 2, "aa": 3, "A": 4, "": 5},
    # UTF-16 order: the astral key (surrogates D83D..) sorts before U+FFFF/U+E000 despite its code point.
    {"\U0001F600": 1, "\uffff": 2, "\ue000": 3, "\u00e9": 4, "z": 5, "\U00010000": 6},
    {"ctl": "\x00\x01\x07\x08\t\n\x0b\x0c\r\x1e\x1f", "quote": '"\\/', "del": "\x7f", "ls": "\u2028\u2029"},
    {"nested": {"z": [1, 2.5, {"y": None, "x": "\u20ac"}], "a": {"\x01": True}}},
    {"numbers": FLOATS},
    ["\U0001F4A9 emoji", "\u00a0nbsp", "tab\tinside"],
]


@pytest.mark.parametrize("value", FLOATS, ids=repr)
def test_floats_print_as_ecmascript(value):
    assert canonicalize(value) == rfc8785.dumps(value)


@pytest.mark.parametrize("value", CORPUS, ids=lambda value: repr(value)[:40])
def test_corpus_matches_rfc8785(value):
    assert canonicalize(value) == rfc8785.dumps(value)


def test_worked_numbers_by_hand():
    assert [number(x) for x in (1e21, 1e-7, 0.1, -0.0, 5e-324, 1e20)] == [
        "1e+21", "1e-7", "0.1", "0", "5e-324", "100000000000000000000",
    ]


def test_keys_sort_by_utf16_code_units_not_code_points():
    out = canonicalize({"\ue000": 1, "\U0001F600": 2})
    assert out == '{"\U0001F600":2,"\ue000":1}'.encode("utf-8")
    assert sorted(["\ue000", "\U0001F600"]) == ["\ue000", "\U0001F600"]  # code point order differs


def test_only_required_escapes():
    assert canonicalize("\x7f\u2028/\x1f\n") == '"\x7f\u2028/\\u001f\\n"'.encode("utf-8")


def test_round_trip_is_idempotent():
    text = canonicalize(CORPUS[-3]).decode("utf-8")
    assert canonicalize(json.loads(text)).decode("utf-8") == text


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), 2**53, -(2**53), 2**53 + 1, 10**30, "\ud800", {"\udc00": 1},
     {1: "int key"}, {True: 1}, {None: 1}, {"a": {2: "nested int key"}}, b"bytes", {"set": {1}}, object()],
    # An object's repr holds its address, which differs between test processes (pytest-xdist
    # refuses a collection that differs between its workers): named by its type instead.
    ids=lambda value: repr(value) if type(value) is not object else "object()",
)
def test_values_without_a_canonical_form_are_refused(value):
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


def _texts():
    for value in CORPUS + FLOATS + [{"n": 2**53 - 1}, {"n": 1234567890123456}, {"s": "1.5e3 in a string \\"}]:
        canonical = canonicalize(value).decode("utf-8")
        yield canonical, True
        yield json.dumps(value, ensure_ascii=False), canonical == json.dumps(value, ensure_ascii=False)
        yield json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")), None
    yield '{"at":"10:00:00.250Z","id":"1234567890123456789","n":1,"t":true}', True  # float-like strings
    yield '{"q":"say \\"1.5\\"","x":2}', True  # an escaped quote
    yield '{"q":"a\\\\","x":1e-07}', False  # a string ending in a backslash, then a float in Python's form
    yield '{"a":1,"a":1}', False  # a duplicate key: not the canonical form of what it parses to
    yield '{"n":1e-07}', False
    yield '{"n":10000000000000000}', True  # the double 1e16, as RFC 8785 prints it
    yield '{"n":10000000000000000.0}', False
    yield '{"n":9007199254740993}', False  # no double has this value
    yield '"\\ud800"', False
    yield "not json", False
    yield '{"\ue000":1,"\U0001F600":2}', False  # code point order, not UTF-16 order


@pytest.mark.parametrize("text,expected", list(_texts()), ids=lambda item: repr(item)[:40])
def test_is_canonical_agrees_with_canonicalize(text, expected):
    from warrant_verify.jcs import is_canonical, loads

    try:
        truth = canonicalize(loads(text)) == text.encode("utf-8")
    except (CanonicalizationError, ValueError):
        truth = False
    assert is_canonical(text) is truth
    if expected is not None:
        assert truth is expected


@pytest.mark.parametrize("fields", [
    {"seq": 7, "prev_hash": "0" * 64, "hash": "f" * 64, "key_id": "ab" * 8, "run_id": "r"},
    {"seq": 7, "prev_hash": "\x7f\x01\"\\", "hash": "\t", "key_id": "/", "run_id": "caf\u00e9 \U0001F600"},
    {"seq": 2**53 - 1, "prev_hash": "", "hash": "", "key_id": "", "run_id": ""},
])
def test_receipt_message_is_the_canonical_form_of_its_fields(fields):
    from warrant_verify.messages import RECEIPT_DOMAIN, receipt_message

    assert receipt_message(**fields) == RECEIPT_DOMAIN + rfc8785.dumps(fields)


def test_the_worked_example_in_docs_evidence_md_is_what_the_code_computes():
    import hashlib
    from pathlib import Path

    from warrant_verify.messages import GENESIS, receipt_hash

    doc = (Path(__file__).resolve().parents[2] / "docs" / "evidence.md").read_text(encoding="utf-8")
    value = {"run_id": "3f6c1a52-9b1e-4c8e-a0d2-5e7f0c4b9a11", "v": 2,
             "totals": {"wall_ms": 1312, "ratio": 0.5, "big": 1e21, "tiny": 1e-7},
             "reason": "ok\tcaf\u00e9", "\U0001F511": "key emoji", "\ue000": "private use"}
    canonical = canonicalize(value)
    assert canonical == rfc8785.dumps(value) and len(canonical) == 177
    assert canonical.decode("utf-8") + "\n" in doc
    assert f"sha256 = {hashlib.sha256(canonical).hexdigest()}" in doc
    assert receipt_hash(GENESIS, canonical.decode("utf-8")) in doc


def test_tuples_canonicalize_as_arrays():
    assert canonicalize({"t": (1, "a", (None,))}) == b'{"t":[1,"a",[null]]}'


def _random_value(rng, depth=0):
    pick = rng.random()
    if depth > 3 or pick < 0.45:
        return rng.choice([
            None, True, False, rng.randint(-10**6, 10**6), rng.randint(-(2**53 - 1), 2**53 - 1),
            rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-30, 30), float(rng.randint(0, 10**9)),
            "".join(rng.choice("ab\"\\\n\x01\x7f\u00e9\u2028\ue000\uffff\U0001F600 .e5:,[") for _ in range(rng.randint(0, 8))),
            "2026-12-01T10:00:00.250Z",
        ])
    if pick < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["a", "b", "\ue000", "\U0001F600", "\u00e9", "1.5", "Z", "", "\x01"]
    return {rng.choice(keys) + rng.choice(["", "x"]): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def test_random_values_match_rfc8785_on_both_paths():
    import random

    from warrant_verify.jcs import is_canonical

    rng = random.Random(8785)
    for _ in range(1500):
        value = _random_value(rng)
        expected = rfc8785.dumps(value)
        assert canonicalize(value) == expected, value
        assert is_canonical(expected.decode("utf-8"))


def test_the_fast_path_never_disagrees_on_doubles():
    import math
    import random
    import struct

    from warrant_verify.jcs import _encoded_by_python

    rng = random.Random(2**53)
    taken = 0
    for _ in range(20000):
        value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isnan(value) or math.isinf(value):
            continue
        value = value if rng.random() < 0.5 else round(value % 10**rng.randint(0, 18), rng.randint(0, 8))
        fast = _encoded_by_python({"x": [value, -value]})
        if fast is not None:
            taken += 1
            assert fast.encode("utf-8") == rfc8785.dumps({"x": [value, -value]}), value
    assert taken > 300  # the fast path really was exercised on floats
