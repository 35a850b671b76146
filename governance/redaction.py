"""Redaction of secrets and personal data in what Warrant writes down: traces and logs.

Pure apart from reading the environment for secret values. Receipts need none of it: they hold
digests of inputs, outputs and arguments, never the text, and stay verifiable as sealed.

Kinds (WARRANT["REDACT"], from WARRANT_REDACT, comma-separated):
- `api_keys`: key-shaped tokens (sk-…, AKIA…, ghp_…, xox…-, AIza…, "api_key=…") and the values
  of environment variables whose names say they are secrets (…_API_KEY, …_SECRET, …_TOKEN,
  …_PASSWORD, DJANGO_SECRET_KEY): the fake key a canary test plants is caught either way.
- `card_numbers`: 13-19 digits (spaces or dashes allowed) that pass the Luhn check and stand
  alone (digits inside a longer token, such as a UUID or a hex digest, are not a card number).
- `emails`: e-mail addresses.
"""

import logging
import os
import re

from governance.screening import strings_in

KINDS = ("api_keys", "card_numbers", "emails")
# Warrant's own API keys (governance.tokens: wt_<public id>_<secret>) are key-shaped too. But
# "token:<public id>" is how a decision names the token it was made with (decided_via): a name,
# not a secret, so it stays readable.
_API_KEY = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{35})\b|\bwt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"
    r"|(?i:\b(?:api[_-]?key|secret|token|password)\s*[=:]\s*)(?<!token:)[^\s,;\"']{8,}"
    r"|\btoken:(?![0-9a-f]{12}(?![^\s,;\"']))[^\s,;\"']{8,}"
)
# Standing alone: a run of digits inside a longer token (a UUID's "a126-4871-8630-5200067b6f38",
# a hex digest) is not a card number, and redacting it would corrupt an id in the trace.
_CARD = re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_SECRET_ENV = re.compile(r"(?:API_KEY|SECRET|SECRET_KEY|TOKEN|PASSWORD)$")
MIN_SECRET_CHARS = 8


def env_secrets() -> list[str]:
    """Values of environment variables named like secrets, longest first.

    Asked for every trace write, so the answer is kept while the environment is the same one:
    the key is the environment's own (already encoded) items, which cost no decoding to compare."""
    raw = getattr(os.environ, "_data", None)
    key = frozenset(raw.items()) if isinstance(raw, dict) else None
    if key is None or key != _env_secrets_kept[0]:
        values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k.upper()) and len(v) >= MIN_SECRET_CHARS}
        _env_secrets_kept[:] = [key, sorted(values, key=len, reverse=True)]
    return list(_env_secrets_kept[1])


_env_secrets_kept: list = [None, []]


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def findings(text: str, *, kinds=KINDS, secrets=()) -> list[str]:
    """Which kinds of sensitive data `text` holds."""
    found = []
    if "api_keys" in kinds and (_API_KEY.search(text) or any(s in text for s in secrets)):
        found.append("api_keys")
    if "card_numbers" in kinds and any(_luhn(re.sub(r"\D", "", m.group(0))) for m in _CARD.finditer(text)):
        found.append("card_numbers")
    if "emails" in kinds and _EMAIL.search(text):
        found.append("emails")
    return found


# The shortest text each pattern can match ("token=" and 8 characters; 13 digits): most strings
# of a trace (keys, names, codes) are shorter, and skip the pattern without running it.
_SHORTEST_KEY, _SHORTEST_CARD = 14, 13


def redact_text(text: str, *, kinds=KINDS, secrets=()) -> str:
    if "api_keys" in kinds:
        for secret in secrets:
            text = text.replace(secret, "[redacted:api_key]")
        if len(text) >= _SHORTEST_KEY:
            text = _API_KEY.sub("[redacted:api_key]", text)
    if "card_numbers" in kinds and len(text) >= _SHORTEST_CARD:
        text = _CARD.sub(lambda m: "[redacted:card_number]" if _luhn(re.sub(r"\D", "", m.group(0))) else m.group(0), text)
    if "emails" in kinds and "@" in text:
        text = _EMAIL.sub("[redacted:email]", text)
    return text


def redact(value, *, kinds=KINDS, secrets=()):
    """A copy of a JSON-like value with every string redacted (keys included)."""
    if isinstance(value, str):
        return redact_text(value, kinds=kinds, secrets=secrets)
    if isinstance(value, dict):
        return {redact(k, kinds=kinds, secrets=secrets): redact(v, kinds=kinds, secrets=secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item, kinds=kinds, secrets=secrets) for item in value]
    return value


def leaks(value, *, secrets=()) -> list[str]:
    """Secrets in a JSON-like value (tool arguments about to leave): API keys and card numbers."""
    found: list[str] = []
    for text in strings_in(value):
        found += [k for k in findings(text, kinds=("api_keys", "card_numbers"), secrets=secrets) if k not in found]
    return found



class RedactingFilter(logging.Filter):
    """Redacts secrets and card numbers from log records (the formatted message and the traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = env_secrets()
        kinds = ("api_keys", "card_numbers")
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call is logging's to report, not a reason to raise here
            return True
        record.msg = redact_text(message, kinds=kinds, secrets=secrets)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, kinds=kinds, secrets=secrets)
        return True
