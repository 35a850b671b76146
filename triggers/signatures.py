"""Webhook signatures (pure): HMAC-SHA256 over the timestamp and the raw body.

    X-Warrant-Timestamp: 1796000000                 (Unix seconds, when the sender signed)
    X-Warrant-Signature: sha256=<hex of HMAC-SHA256(secret, b"1796000000." + raw body)>

The timestamp is inside the signed message, so moving it to pass the replay window breaks the
signature; the digest of the message is what makes a delivery "the same one" (triggers.webhooks).
"""

import hashlib
import json
import hmac

PREFIX = "sha256="


def message(timestamp: str, body: bytes) -> bytes:
    return timestamp.encode("ascii") + b"." + body


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Warrant-Signature header value a sender computes."""
    return PREFIX + hmac.new(secret.encode("utf-8"), message(timestamp, body), hashlib.sha256).hexdigest()


def valid(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """The header is the signature of this timestamp and body under `secret` (constant time)."""
    if not secret or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, timestamp, body).encode("ascii"), header.strip().encode("ascii", "replace"))


def parse_timestamp(value: str) -> int | None:
    """The header's Unix seconds, or None when it is not a plain decimal integer."""
    value = value.strip()
    if not value.isdigit() or len(value) > 12:
        return None
    return int(value)


def digest(body: bytes) -> str:
    """The payload's sha256, as the receipt records it: of the raw body a webhook sent."""
    return hashlib.sha256(body).hexdigest()


def digest_json(value) -> str:
    """A schedule's payload has no body: the sha256 of its compact, key-sorted JSON."""
    return digest(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
