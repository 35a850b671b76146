"""Appending to a signed record chain (review records, trust changes): the lock that serialises
appends, the link to the head, the hash and the signature, the same for every chain so that each
is checked by the same code offline (warrant_verify.record_chain)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection

from runs import signing
from runs.receipts import canonical
from warrant_verify.messages import receipt_hash


@dataclass(frozen=True)
class Seal:
    seq: int
    prev_hash: str
    hash: str
    body: str
    key_id: str
    signature: str


def lock_chain(key: int) -> None:
    """Held to the end of the transaction: two appends never take the same seq. SQLite has one
    writer at a time anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def seal_next(*, lock: int, head: Callable[[], tuple[int, str]], body: dict, message: Callable[..., bytes],
              **ids: str) -> Seal:
    """The next record of a chain: inside the caller's transaction, with the chain locked until it
    commits. `head`: (seq, hash) of the newest record; `message`: the chain's signed bytes, given
    seq, prev_hash, hash, key_id and `ids`."""
    key_id, _key = signing.signing_key()  # before the lock: a missing key fails without holding it
    lock_chain(lock)
    last_seq, prev_hash = head()
    text = canonical(body)
    seq, hash_ = last_seq + 1, receipt_hash(prev_hash, text)
    signature = signing.sign(message(seq=seq, prev_hash=prev_hash, hash=hash_, key_id=key_id, **ids))
    return Seal(seq, prev_hash, hash_, text, key_id, signature)
