"""The receipt signing key ring: the Ed25519 key that signs receipts and checkpoints, and the
public keys that verify them (the active one, and those retired by rotation).

The private key never lives in the database, so a DBA or a superuser who rewrites rows cannot
re-sign them: it comes from WARRANT_RECEIPT_SIGNING_KEY_FILE (PEM, PKCS8) or
WARRANT_RECEIPT_SIGNING_KEY (PEM, or base64 of the raw 32 bytes), both set by the platform
engineer. In debug mode with neither set, a demo key is generated once under the data directory,
and the log says so. Retired public keys come from WARRANT_RECEIPT_PUBLIC_KEYS_FILE (keys.json),
each with the bound rotation gave it (the last receipt seq it signed, and when it was retired).
A key listed there signs nothing more, in any process, so nothing legitimate lies past its bound.
"""

import base64
import binascii
import hashlib
import json
import logging
import os
import stat
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from warrant_verify.keys import (KeySetError, Retirement, key_id, load_key_set, public_key_document,
                                 retirement_of)

logger = logging.getLogger(__name__)
DEMO_KEY_NAME = "receipt-signing-key.pem"
_SETTINGS = {"WARRANT_RECEIPT_SIGNING_KEY_FILE", "WARRANT_RECEIPT_SIGNING_KEY", "WARRANT_RECEIPT_PUBLIC_KEYS_FILE",
             "WARRANT_RECEIPT_DEMO_KEY", "DATA_DIR"}


class SigningKeyMissing(ImproperlyConfigured):
    pass


class SigningKeyRetired(ImproperlyConfigured):
    """The configured key was retired by rotation: signing with it would go past its published bound."""


def parse_private_key(data: bytes, *, origin: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS8) or base64 of its raw 32 bytes."""
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text, password=None)
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(f"{origin}: not an unencrypted PEM private key ({exc})") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise ImproperlyConfigured(f"{origin}: the key is not Ed25519")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImproperlyConfigured(f"{origin}: neither PEM nor base64") from exc
    if len(raw) != 32:
        raise ImproperlyConfigured(f"{origin}: base64 of {len(raw)} bytes, an Ed25519 key has 32")
    return Ed25519PrivateKey.from_private_bytes(raw)


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_private_key(path: Path, key: Ed25519PrivateKey, *, replace: bool = False) -> None:
    """Write the key readable by its owner only; never over another key unless asked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_key_pem(key))
        handle.flush()
        os.fsync(handle.fileno())
    try:
        if replace:
            os.replace(staging, path)
        else:
            os.link(staging, path)  # fails if another process made the key first: theirs wins
    finally:
        staging.unlink(missing_ok=True)


def demo_key_path() -> Path:
    return Path(settings.DATA_DIR) / DEMO_KEY_NAME


def _load() -> tuple[Ed25519PrivateKey, str]:
    """The signing key and where it came from."""
    if settings.WARRANT_RECEIPT_SIGNING_KEY_FILE:
        path = Path(settings.WARRANT_RECEIPT_SIGNING_KEY_FILE)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ImproperlyConfigured(f"WARRANT_RECEIPT_SIGNING_KEY_FILE: cannot read {path} ({exc})") from exc
        return parse_private_key(data, origin=f"WARRANT_RECEIPT_SIGNING_KEY_FILE ({path})"), f"file {path}"
    if settings.WARRANT_RECEIPT_SIGNING_KEY:
        return (parse_private_key(settings.WARRANT_RECEIPT_SIGNING_KEY.encode(), origin="WARRANT_RECEIPT_SIGNING_KEY"),
                "WARRANT_RECEIPT_SIGNING_KEY")
    if not settings.WARRANT_RECEIPT_DEMO_KEY:
        raise SigningKeyMissing(missing_key_message())
    path = demo_key_path()
    if not path.exists():
        try:
            write_private_key(path, Ed25519PrivateKey.generate())
        except FileExistsError:
            pass
    key = parse_private_key(path.read_bytes(), origin=f"the demo key {path}")
    logger.warning("receipts are signed with a DEMO key (%s, key id %s), made because no signing key is set; "
                   "production sets WARRANT_RECEIPT_SIGNING_KEY_FILE", path, key_id(key.public_key()))
    return key, f"demo {path}"


def missing_key_message() -> str:
    return ("No receipt signing key: set WARRANT_RECEIPT_SIGNING_KEY_FILE to an Ed25519 private key in PEM "
            "(make one with `manage.py receipt_keys generate --out PATH`) or WARRANT_RECEIPT_SIGNING_KEY. "
            "Without it no run can be sealed.")


@lru_cache(maxsize=1)
def _ring() -> tuple[str, Ed25519PrivateKey, str]:
    key, origin = _load()
    return key_id(key.public_key()), key, origin


@receiver(setting_changed)
def _forget(*, setting, **kwargs):
    if setting in _SETTINGS:
        _ring.cache_clear()


def reload() -> None:
    """Read the key again (after a rotation in this process)."""
    _ring.cache_clear()


def signing_key() -> tuple[str, Ed25519PrivateKey]:
    """(key id, private key) of the key that signs from now on."""
    kid, key, _origin = _ring()
    if kid in retired_keys():
        # Rotating the demo key replaces it in place: read it again. A key file named in the
        # environment stays the retired key until the process restarts with the new one.
        _ring.cache_clear()
        kid, key, _origin = _ring()
    return kid, key


def signing_origin() -> str:
    """Where the active key came from: a file, the environment, or the demo key."""
    return _ring()[2]


def sign(message: bytes) -> str:
    """The base64 Ed25519 signature of `message` by the active key; refused once that key is retired.

    Never a switch to another key here: the caller already wrote this key's id into what it signs.
    Sealing calls this under the chain lock, which rotation holds while it reads the head it
    writes as the bound, so no receipt by the old key can land past it."""
    kid, key, _origin = _ring()
    retired = retired_keys().get(kid)
    if retired is not None:
        raise SigningKeyRetired(f"the receipt signing key {kid} was retired (after receipt "
                                f"#{retired[1].after_seq}) and signs nothing more: point WARRANT_RECEIPT_SIGNING_KEY_FILE "
                                "at the new key and restart this process")
    return base64.b64encode(key.sign(message)).decode("ascii")


def public_keys_path() -> Path:
    return Path(settings.WARRANT_RECEIPT_PUBLIC_KEYS_FILE)


_retired_read: dict = {}  # the public key set file as last read: {"stamp": ..., "keys": ...}


def retired_keys() -> dict[str, tuple[Ed25519PublicKey, Retirement]]:
    """Key id -> (public key, bound) of the keys rotation retired, from the public key set file in
    its order; read again whenever the file changes (every signature asks). An entry written
    before bounds existed comes with an empty bound."""
    path = public_keys_path()
    try:
        info = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ImproperlyConfigured(f"WARRANT_RECEIPT_PUBLIC_KEYS_FILE ({path}): {exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        return {}
    stamp = (str(path), info.st_ino, info.st_mtime_ns, info.st_size)
    if _retired_read.get("stamp") != stamp:
        try:
            keys = load_key_set(json.loads(path.read_bytes()))
        except (OSError, ValueError, KeySetError) as exc:
            raise ImproperlyConfigured(f"WARRANT_RECEIPT_PUBLIC_KEYS_FILE ({path}): {exc}") from exc
        _retired_read.update(stamp=stamp, keys={
            kid: (getattr(key, "public_key", key), retirement_of(key) or Retirement()) for kid, key in keys.items()})
    return dict(_retired_read["keys"])


def key_set_document() -> dict:
    """keys.json: the active key, then every retired one with its bound (a retired key still
    verifies what it signed up to it). A process still holding a retired key lists it as retired."""
    active_id, active = signing_key()
    retired = retired_keys()
    keys = [] if active_id in retired else [(active.public_key(), "active")]
    keys += [(public, "retired", bound) for public, bound in retired.values()]
    return public_key_document(keys)


def key_set() -> dict[str, Ed25519PublicKey]:
    """Key id -> public key, for verification."""
    return load_key_set(key_set_document())


class _RememberingKey:
    """A public key that remembers the signatures it found good, so verifying the same receipts
    and checkpoints again (every API verify, every workbench page) costs a digest each instead of
    an Ed25519 check. Only successes are kept, keyed by sha256(public key, message, signature):
    nothing an attacker can put in the database makes a bad signature pass."""

    _good: set = set()
    LIMIT = 500_000  # about 50 MB; past it the memory starts over

    def __init__(self, key: Ed25519PublicKey):
        self._key = key
        self._raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    def verify(self, signature: bytes, message: bytes) -> None:
        seen = hashlib.sha256(self._raw + signature + message).digest()
        if seen in self._good:
            return
        self._key.verify(signature, message)  # raises InvalidSignature
        if len(self._good) >= self.LIMIT:
            self._good.clear()
        self._good.add(seen)

    def __getattr__(self, name):
        return getattr(self._key, name)


def verifying_keys() -> dict:
    """key_set() for verification in this process: the same keys, remembering good signatures."""
    return {kid: _RememberingKey(key) for kid, key in key_set().items()}
