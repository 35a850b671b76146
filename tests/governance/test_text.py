"""governance.text: skeletons, mixed scripts and confusable addresses (pure, no database)."""

from governance.text import confusable_findings, mixed_script, skeleton

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
