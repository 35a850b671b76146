"""core.text: skeletons, mixed scripts and confusable addresses (pure, no database)."""

import random

import pytest

from core.confusables import confusable_findings, mixed_script
from core.text import _TABLES, fold, normalize, skeleton

CYRILLIC_A = "\u0430"


def test_skeleton_makes_lookalikes_equal():
    assert skeleton(f"ex{CYRILLIC_A}mple.com") == skeleton("example.com")
    assert skeleton("\uff53alary") == skeleton("salary")  # fullwidth s
    assert skeleton("paypal") != skeleton("paypai")


def test_mixed_script_spots_a_single_foreign_letter():
    assert mixed_script(f"p{CYRILLIC_A}ypal")
    assert not mixed_script("paypal")
    assert not mixed_script("\u041c\u043e\u0441\u043a\u0432\u0430")  # Москва
    assert not mixed_script("\u6771\u4eac\u30bf\u30ef\u30fc")  # 東京タワー: Han with kana is Japanese
    assert not mixed_script("2026-12-01 #42")


def test_a_confusable_email_address_is_flagged_and_says_how_it_reads():
    findings = confusable_findings(f"dana.whitfield@ex{CYRILLIC_A}mple.com")
    text = " ".join(findings)
    assert "mixes scripts" in text
    assert "CYRILLIC SMALL LETTER A" in text
    assert "reads as 'dana.whitfield@example.com'" in text


def test_a_plain_ascii_address_or_url_is_not_flagged():
    assert confusable_findings("dana.whitfield@example.com") == []
    assert confusable_findings("https://api.example.com/v1/notes?x=1") == []


def test_punycode_that_decodes_to_lookalikes_is_flagged():
    # xn--80ak6aa92e is "аррӏе", all Cyrillic: one script, but every letter passes for Latin.
    findings = confusable_findings("ceo@xn--80ak6aa92e.com")
    assert any("punycode" in f for f in findings)
    assert any("reads as 'app" in f for f in findings)


def test_a_url_host_with_a_lookalike_is_flagged():
    assert confusable_findings(f"https://p{CYRILLIC_A}ypal.com/login")


def test_invisible_characters_in_an_address_are_flagged():
    assert any("U+200B" in f for f in confusable_findings("dana\u200b@example.com"))


def test_a_whole_label_in_another_script_is_not_an_attack_by_itself():
    assert confusable_findings("info@\u043c\u043e\u0441\u043a\u0432\u0430.\u0440\u0444") == []  # москва.рф


# normalize: the views and the way back to the text as sent

PIECES = ["a", "b", "m", " ", "  ", "\t", "\n ", "x%", '"', "0", "\u0430", "\u0455", "\uff41", "\ufb01", "\u00df",
          "\u0301", "\u200b", "\u00ad", "\U000e0061", "\ufe0f", "\u00a0", "\u3000", "\u00a8", "\u2460", "\u0130"]


def walked(text: str, view: str) -> list[int]:
    """The oracle: for each character of the view, where it came from, by walking the text."""
    starts, pending = [], None
    for at, char in enumerate(text):
        for out in _TABLES[view].ready(text)[ord(char)]:
            if view != "key":
                starts.append(at)
            elif out.isspace():
                if starts and pending is None:
                    pending = at
            else:
                if pending is not None:
                    starts.append(pending)
                    pending = None
                starts.append(at)
    return starts


@pytest.mark.parametrize("seed", range(5))
def test_a_quote_is_the_text_as_sent_behind_any_span_of_any_view(seed):
    rng = random.Random(seed)
    for _ in range(400):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 25)))
        normalized = normalize(text)
        for view in ("plain", "read", "key"):
            shown = normalized.view(view)
            starts = walked(text, view)
            assert len(starts) == len(shown), (text, view)
            if not shown:
                continue
            start = rng.randrange(len(shown))
            end = rng.randrange(start, len(shown)) + 1
            quoted = normalized.quote(view, start, end)
            assert quoted.startswith(text[starts[start]:starts[end - 1] + 1]), (text, view, start, end)
            # what the quote adds after the last character is only what shows nothing
            assert fold(quoted) == fold(text[starts[start]:starts[end - 1] + 1]), (text, view, start, end)


def test_the_key_is_the_same_for_what_reads_the_same():
    assert fold("\u0405\u0410L\u0410RY") == fold("salary") == fold("s\u00e1l\u0301ary") == fold("SAL\u200bARY")
    assert fold("At \n\t RISK") == "at risk"
    assert fold("stra\u00dfe") == fold("STRASSE")
    assert fold("\u0271") == fold("m")  # a look-alike of m folds onto m, not onto the skeleton's "rn"
    assert fold("rnoney") != fold("money")  # ASCII is taken as written


def test_ascii_text_is_its_own_plain_and_read_view():
    normalized = normalize("Plain ASCII, 100%")
    assert normalized.plain is normalized.original and normalized.read is normalized.original


def test_the_read_view_keeps_digits_and_maps_lookalikes_in_their_case():
    assert normalize("SSN 123\u200b-45 \u0406GN\u041eR\u0415 \u0456gn\u043er\u0435").read == "SSN 123-45 IGNORE ignore"
