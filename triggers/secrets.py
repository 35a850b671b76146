"""A webhook trigger's HMAC secret: made here, shown once, kept encrypted.

HMAC needs the secret itself to verify (unlike a token, it cannot be kept as a digest), so it is
stored encrypted with Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`) under a key
derived from DJANGO_SECRET_KEY with HKDF. Reading the database alone does not give the secret;
rotating DJANGO_SECRET_KEY makes every trigger's secret unreadable, and each must be rotated
(docs/triggers.md). No page or answer shows it again after the one that made it.
"""

import base64
import secrets as random

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

SECRET_BYTES = 32
_INFO = b"warrant trigger webhook secret v1"


def _fernet() -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
        settings.SECRET_KEY.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(key))


def new_secret() -> str:
    """A fresh secret, in the form senders paste into their configuration."""
    return "whsec_" + random.token_urlsafe(SECRET_BYTES)


def seal(secret: str) -> str:
    return _fernet().encrypt(secret.encode("utf-8")).decode("ascii")


def unseal(sealed: str) -> str:
    """The secret, or "" when there is none or it was sealed under another DJANGO_SECRET_KEY
    (every signature then fails: closed, until the secret is rotated)."""
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode("ascii")).decode("utf-8")
    except InvalidToken:
        return ""
