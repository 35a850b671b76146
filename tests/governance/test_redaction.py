"""Redaction finds card numbers where they stand alone, and leaves ids that merely contain digits."""

import uuid

from governance import redaction

KINDS = ("api_keys", "card_numbers", "emails")


def _redact(text: str) -> str:
    return redaction.redact({"text": text}, kinds=KINDS, secrets=())["text"]


def test_card_numbers_written_the_usual_ways_are_redacted():
    for text in ("4111 1111 1111 1111", "Card 4111-1111-1111-1111, exp 12/29", "card:4111111111111111.",
                 "(5500 0000 0000 0004)"):
        assert "[redacted:card_number]" in _redact(text) and "4111 1111" not in _redact(text), text


def test_a_uuid_is_never_taken_for_a_card_number():
    # This one held a Luhn-valid run of digits between two hex letters and was cut in the trace.
    assert _redact("e2742aea-a126-4871-8630-5200067b6f38") == "e2742aea-a126-4871-8630-5200067b6f38"
    ids = [str(uuid.UUID(int=uuid.uuid4().int)) for _ in range(20_000)]
    assert [i for i in ids if _redact(i) != i] == []
    digest = "3f6d1a0b5c2e4f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a"
    assert _redact(digest) == digest


def test_secrets_follow_the_environment_as_it_changes(monkeypatch):
    """env_secrets is kept between calls, but never past a change to the environment."""
    monkeypatch.setenv("BENCH_PARTNER_API_KEY", "first-secret-value")
    assert "first-secret-value" in redaction.env_secrets()
    monkeypatch.setenv("BENCH_PARTNER_API_KEY", "second-secret-value")
    secrets = redaction.env_secrets()
    assert "second-secret-value" in secrets and "first-secret-value" not in secrets
    monkeypatch.delenv("BENCH_PARTNER_API_KEY")
    assert "second-secret-value" not in redaction.env_secrets()
    monkeypatch.setenv("SOME_PASSWORD", "a-password-value")
    assert redaction.redact({"note": "pw a-password-value"}, kinds=["api_keys"], secrets=redaction.env_secrets()) == {
        "note": "pw [redacted:api_key]"}


def test_the_shortest_text_each_kind_can_match_is_still_redacted():
    """Strings shorter than a pattern's shortest match skip it; the shortest matches do not."""
    assert redaction.redact_text("token=abcdefgh", kinds=["api_keys"]) == "[redacted:api_key]"
    assert redaction.redact_text("4000000000006", kinds=["card_numbers"]) == "[redacted:card_number]"  # 13 digits, Luhn
    assert redaction.redact_text("a@b.co", kinds=["emails"]) == "[redacted:email]"
    assert redaction.redact_text("shortsecret", kinds=["api_keys"], secrets=["shortsec"]) == "[redacted:api_key]ret"
