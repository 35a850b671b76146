"""Ed25519 key ids, the published key set (keys.json) and signature checks."""

import base64
import binascii
import hashlib
import json
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

STATUSES = ("active", "retired")


class KeySetError(ValueError):
    """A key set or public key file that cannot be read."""


def raw_public_bytes(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of sha256 over the raw 32-byte public key."""
    return hashlib.sha256(raw_public_bytes(public_key)).hexdigest()[:16]


def public_key_document(keys) -> dict:
    """The keys.json document for (public_key, status) pairs, in the order given."""
    entries = []
    for public_key, status in keys:
        if status not in STATUSES:
            raise KeySetError(f"key status {status!r} is not one of {STATUSES}")
        entries.append(
            {
                "key_id": key_id(public_key),
                "algorithm": "Ed25519",
                "public_key": base64.b64encode(raw_public_bytes(public_key)).decode("ascii"),
                "status": status,
            }
        )
    return {"keys": entries}


def load_key_set(source) -> dict[str, Ed25519PublicKey]:
    """Key id -> public key from a keys.json dict, a keys.json file or a PEM public key file.

    Retired keys are kept: they still verify the receipts they signed before rotation.
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


def _from_document(document) -> dict[str, Ed25519PublicKey]:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeySetError('key set is not an object with a "keys" list')
    keys: dict[str, Ed25519PublicKey] = {}
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
        keys[entry["key_id"]] = public_key
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
