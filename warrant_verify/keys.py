"""Ed25519 key ids, the published key set (keys.json) and signature checks."""

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

STATUSES = ("active", "retired")


class KeySetError(ValueError):
    """A key set or public key file that cannot be read."""


@dataclass(frozen=True)
class Retirement:
    """How far a retired key's signatures reach: receipts up to seq `after_seq`, checkpoints and
    manifests dated up to `at`. None is no bound (key sets written before bounds existed)."""

    after_seq: int | None = None
    at: str | None = None

    @property
    def bounded(self) -> bool:
        return self.after_seq is not None and self.at is not None

    def fields(self) -> dict:
        """The entry's keys.json fields for this bound."""
        found = {"retired_after_seq": self.after_seq, "retired_at": self.at}
        return {name: value for name, value in found.items() if value is not None}

    def tighter(self, other: "Retirement | None") -> "Retirement":
        """The bound both allow: the two sources of one key may disagree, and a bound only ever forbids."""
        if other is None:
            return self
        seqs = [s for s in (self.after_seq, other.after_seq) if s is not None]
        times = [t for t in (self.at, other.at) if t is not None]
        return Retirement(min(seqs) if seqs else None, min(times, key=_moment) if times else None)


class RetiredKey:
    """A retired public key and its Retirement: verifies like the key it wraps."""

    def __init__(self, public_key: Ed25519PublicKey, retirement: Retirement):
        self.public_key = public_key
        self.retirement = retirement

    def verify(self, signature: bytes, message: bytes) -> None:
        self.public_key.verify(signature, message)

    def public_bytes(self, *args, **kwargs) -> bytes:
        return self.public_key.public_bytes(*args, **kwargs)


def retirement_of(key) -> Retirement | None:
    """The key's Retirement when it is retired, else None (wrappers such as a caching key forward it)."""
    return getattr(key, "retirement", None)


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def raw_public_bytes(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of sha256 over the raw 32-byte public key."""
    return hashlib.sha256(raw_public_bytes(public_key)).hexdigest()[:16]


def public_key_document(keys) -> dict:
    """The keys.json document for (public_key, status) or (public_key, "retired", Retirement), in the order given."""
    entries = []
    for public_key, status, *bound in keys:
        if status not in STATUSES:
            raise KeySetError(f"key status {status!r} is not one of {STATUSES}")
        retirement = bound[0] if bound else None
        if retirement is not None and status != "retired":
            raise KeySetError("only a retired key carries a retirement bound")
        entry = {
            "key_id": key_id(public_key),
            "algorithm": "Ed25519",
            "public_key": base64.b64encode(raw_public_bytes(public_key)).decode("ascii"),
            "status": status,
        }
        entries.append(entry | (retirement.fields() if retirement else {}))
    return {"keys": entries}


def load_key_set(source) -> dict:
    """Key id -> public key from a keys.json dict, a keys.json file or a PEM public key file.

    Retired keys are kept, as RetiredKey: they still verify what they signed before rotation,
    and their bound says how far that reaches.
    """
    if isinstance(source, dict):
        return _from_document(source)
    data = Path(source).read_bytes()
    if data.lstrip().startswith(b"-----BEGIN"):
        try:
            public_key = serialization.load_pem_public_key(data)
        except ValueError as exc:
            raise KeySetError(f"{source}: not a PEM public key ({exc})") from exc
        if not isinstance(public_key, Ed25519PublicKey):
            raise KeySetError(f"{source}: not an Ed25519 public key")
        return {key_id(public_key): public_key}
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeySetError(f"{source}: neither a PEM public key nor a keys.json document ({exc})") from exc
    return _from_document(document)


def _from_document(document) -> dict:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeySetError('key set is not an object with a "keys" list')
    keys: dict = {}
    for index, entry in enumerate(document["keys"]):
        if not isinstance(entry, dict) or entry.get("algorithm") != "Ed25519":
            raise KeySetError(f"key #{index + 1} is not an Ed25519 entry")
        try:
            raw = base64.b64decode(str(entry.get("public_key", "")), validate=True)
            public_key = Ed25519PublicKey.from_public_bytes(raw)
        except (binascii.Error, ValueError) as exc:
            raise KeySetError(f"key #{index + 1}: public_key is not 32 raw bytes in base64") from exc
        # The id is recomputed, never trusted: a key set cannot pass one key off under another's id.
        if entry.get("key_id") != key_id(public_key):
            raise KeySetError(f"key #{index + 1}: key_id {entry.get('key_id')!r} does not match its public key")
        retirement = _retirement(entry, index)
        found = {entry["key_id"]: RetiredKey(public_key, retirement) if retirement else public_key}
        # A key listed twice keeps the tighter bound: a second entry cannot lift the first's.
        keys.update(merge_key_sets(keys, found) if entry["key_id"] in keys else found)
    return keys


def _retirement(entry: dict, index: int) -> Retirement | None:
    """The entry's bound when it is retired; a malformed bound makes the whole set unusable,
    since reading it as "no bound" would let the key sign anything."""
    after_seq, at = entry.get("retired_after_seq"), entry.get("retired_at")
    if entry.get("status") != "retired":
        if after_seq is not None or at is not None:
            raise KeySetError(f"key #{index + 1}: a retirement bound on a key that is not retired")
        return None
    if after_seq is not None and (not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0):
        raise KeySetError(f"key #{index + 1}: retired_after_seq is not a receipt seq (an integer, 0 or more)")
    if at is not None:
        try:
            moment = _moment(at) if isinstance(at, str) else None
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise KeySetError(f"key #{index + 1}: retired_at is not an ISO 8601 time with a zone")
    return Retirement(after_seq, at)


def merge_key_sets(first: dict, second: dict) -> dict:
    """Both sets' keys (second's object for a key in both), each retired key under the tighter of its bounds."""
    merged = {**first, **second}
    for kid in first.keys() & second.keys():
        bounds = [retirement_of(first[kid]), retirement_of(second[kid])]
        if any(bounds):
            key = merged[kid]
            public = key.public_key if isinstance(key, RetiredKey) else key
            tightest = [b for b in bounds if b is not None]
            merged[kid] = RetiredKey(public, tightest[0].tighter(tightest[-1]))
    return merged


def portable(keys: dict) -> dict:
    """Key id -> (raw public key, Retirement or None): the key set as a helper process receives it."""
    return {kid: (raw_public_bytes(key), retirement_of(key)) for kid, key in keys.items()}


def from_portable(raw_keys: dict) -> dict:
    keys = {}
    for kid, (raw, retirement) in raw_keys.items():
        public_key = Ed25519PublicKey.from_public_bytes(raw)
        keys[kid] = RetiredKey(public_key, retirement) if retirement is not None else public_key
    return keys


def decode_signature(signature_b64) -> bytes | None:
    if not isinstance(signature_b64, str):
        return None
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    return signature if len(signature) == 64 else None


def verify_signature(keys: dict, key_id: str, message: bytes, signature_b64) -> str:
    """"" when the signature is good, otherwise why not."""
    public_key = keys.get(key_id) if isinstance(key_id, str) else None
    if public_key is None:
        return f"signed by unknown key {key_id!r}"
    signature = decode_signature(signature_b64)
    if signature is None:
        return "signature is not 64 bytes of base64"
    try:
        public_key.verify(signature, message)
    except InvalidSignature:
        return f"signature does not verify with key {key_id}"
    return ""
