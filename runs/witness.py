"""The witness: the chain's head, signed, written where the database's users cannot reach.

After a seal commits (every seal, or at most every WARRANT_WITNESS_INTERVAL_SECONDS), the newest
receipt's seq and hash become a signed checkpoint (evidence format v2): stored in the database
and sent to each configured sink, an append-only JSON lines file (WARRANT_WITNESS_FILE) and an
HTTP endpoint (WARRANT_WITNESS_URL, on a host in WARRANT_WITNESS_ALLOWED_HOSTS). A checkpoint at
#N vouches for every receipt up to N (the hashes chain), so a sink that missed some only needs
the newest one: the reconciler (witness_catch_up) brings a sink that was down up to the head.

A seal never waits on a sink that is failing: a sink that failed is left alone for BACKOFF
seconds, and the run's own transaction never involves the witness at all.

Other chains are witnessed through the same sinks (the review chain and the trust chain: review.apps
registers them in OTHER_CHAINS, since runs imports no app above it). Their checkpoints have a kind and a signing
domain of their own, are made whenever their chain grows or a sink lacks the head, and are not kept
in the database: a signed head there would be the key holder's word, which the witness exists to
check. Each sink's progress on such a chain is a WitnessSink row of its own ("review-file", ...).
"""

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core import egress
from runs import signing
from runs.models import Receipt, ReceiptCheckpoint, WitnessSink
from warrant_verify.messages import checkpoint_message
from warrant_verify.review_chain import REVIEW_CHECKPOINT_KIND
from warrant_verify.trust_chain import TRUST_CHECKPOINT_KIND

logger = logging.getLogger(__name__)
BACKOFF_SECONDS = 30
HTTP_TIMEOUT_SECONDS = 3.0


def _iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


def checkpoint_document(*, seq: int, head: str, at, key_id: str, signature: str | None) -> dict:
    document = {"v": 1, "kind": "warrant.checkpoint", "seq": seq, "head": head,
                "at": at if isinstance(at, str) else _iso(at), "key_id": key_id}
    if signature is not None:
        document["signature"] = signature
    return document


def parse_checkpoint_at(text: str):
    return parse_datetime(text) if isinstance(text, str) else None


def sinks() -> list[str]:
    """The configured sinks, by name."""
    return [name for name, on in (("file", settings.WARRANT_WITNESS_FILE), ("http", settings.WARRANT_WITNESS_URL)) if on]


def _head() -> tuple[int, str] | None:
    from runs.receipts import chain_head  # receipts imports this module

    seq, hash_ = chain_head()
    return (seq, hash_) if seq else None


def _stored_checkpoint(seq: int) -> ReceiptCheckpoint | None:
    return ReceiptCheckpoint.objects.filter(seq=seq).first()


def checkpoint_head(head: tuple[int, str] | None = None, *, fresh: bool = False) -> ReceiptCheckpoint | None:
    """The signed checkpoint of `head` (seq, hash; by default the chain's head now): made now, or
    the one made before. `fresh`: `head` was just sealed, so the insert is tried without a read first."""
    head = head or _head()
    if head is None:
        return None
    seq, hash_ = head
    # A head a seal just committed has no checkpoint yet (try the insert, as below); any other may.
    if not fresh and (existing := _stored_checkpoint(seq)) is not None:
        return existing
    key_id, _key = signing.signing_key()
    at = timezone.now()
    signature = signing.sign(checkpoint_message(checkpoint_document(seq=seq, head=hash_, at=at, key_id=key_id,
                                                                    signature=None)))
    point = ReceiptCheckpoint(seq=seq, head=hash_, at=at, key_id=key_id, signature=signature)
    try:
        with transaction.atomic():
            point.save()
    except IntegrityError:  # another publisher signed this head first (unique seq): send theirs
        stored = _stored_checkpoint(seq)
        if stored is None:
            raise  # not a lost race: say what the database refused
        return stored
    return point


def _deliver_file(document: dict) -> None:
    path = Path(settings.WARRANT_WITNESS_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    # O_APPEND: one write() per line, so processes appending at once never interleave a line.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def witness_host_allowed(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return urlsplit(url).scheme in ("http", "https") and host in settings.WARRANT_WITNESS_ALLOWED_HOSTS


def _deliver_http(document: dict) -> None:
    url = settings.WARRANT_WITNESS_URL
    if not witness_host_allowed(url):
        raise WitnessRefused("the witness URL's host is not in WARRANT_WITNESS_ALLOWED_HOSTS")
    # Through the egress client like every other outbound call: the address connected to is the one
    # checked, no proxy from the environment, and a redirect is a failure, never followed.
    try:
        with egress.client(allowed_hosts=settings.WARRANT_WITNESS_ALLOWED_HOSTS,
                           setting="WARRANT_WITNESS_ALLOWED_HOSTS", timeout=httpx.Timeout(HTTP_TIMEOUT_SECONDS),
                           follow_redirects=False) as client:
            response = client.post(url, json=document)
    except egress.EgressRefused as exc:
        raise WitnessRefused(str(exc)) from None
    if not 200 <= response.status_code < 300:
        raise WitnessRefused(f"the witness answered HTTP {response.status_code}")


class WitnessRefused(Exception):
    pass


_DELIVER = {"file": _deliver_file, "http": _deliver_http}


def _error_text(exc: Exception) -> str:
    # Shown by /readyz, which anyone may read: the kind of failure, never the URL.
    return str(exc)[:300] if isinstance(exc, WitnessRefused) else type(exc).__name__


def _record(name: str, *, seq: int | None, error: str = "") -> None:
    now = timezone.now()
    values = ({"failed_at": now, "error": error} if error
              else {"delivered_seq": seq, "delivered_at": now, "failed_at": None, "error": ""})
    if not WitnessSink.objects.filter(name=name).update(**values):
        WitnessSink.objects.get_or_create(name=name)  # the sink's first delivery
        WitnessSink.objects.filter(name=name).update(**values)


def _sink_state() -> dict[str, tuple[int, bool, object]]:
    """name -> (delivered seq, failing, failed at)."""
    rows = WitnessSink.objects.values_list("name", "delivered_seq", "failed_at")
    return {name: (delivered, failed is not None, failed) for name, delivered, failed in rows}


# When the newest checkpoint this process made or read was created: the interval's clock, kept so
# that a seal within the interval need not ask the database. Another process's newer checkpoint
# only makes this one wait longer than it had to, never send more often.
_last_seen: list = [None]


def witness_publish(*, force: bool = False, head: tuple[int, str] | None = None) -> dict:
    """Give every sink the head's checkpoint, unless it has it. `force`: also sinks in backoff, and
    regardless of the interval (the reconciler, verify_receipts). `head`: the (seq, hash) a seal
    just committed, saving the read. What each sink did, by name."""
    names = sinks()
    interval = settings.WARRANT_WITNESS_INTERVAL_SECONDS
    if not force and interval > 0:
        # A checkpoint this process made or saw within the interval answers without a read.
        if _last_seen[0] is not None and _last_seen[0] > timezone.now() - timedelta(seconds=interval):
            return {name: "later" for name in names}
        newest = ReceiptCheckpoint.objects.order_by("-seq").values_list("created_at", flat=True).first()
        if newest is not None and newest > timezone.now() - timedelta(seconds=interval):
            _last_seen[0] = newest
            return {name: "later" for name in names}
        head = None  # a checkpoint of the chain as it is by now
    point = checkpoint_head(head, fresh=head is not None and not force)
    if point is None:
        return {name: "empty" for name in names}
    _last_seen[0] = max(filter(None, (_last_seen[0], point.created_at)))
    return _give(names, seq=point.seq, document=point.document, force=force)


def _give(names: list[str], *, seq: int, document: Callable[[], dict], force: bool, prefix: str = "") -> dict:
    """Send the checkpoint at `seq` to every sink that lacks it; what each did, by its row's name.
    `document` is called once, at the first sink that needs it; `prefix` names another chain's rows."""
    state = _sink_state() if names else {}
    done, made = {}, []
    backoff = timezone.now() - timedelta(seconds=BACKOFF_SECONDS)
    for name in names:
        row = prefix + name
        delivered, failing, failed_at = state.get(row, (None, False, None))
        # Only this very checkpoint counts as delivered: a sink row claiming more (edited in the
        # database to silence the witness) is sent the head again.
        if delivered == seq and not failing:
            done[row] = "current"
            continue
        if not force and failing and failed_at and failed_at > backoff:
            done[row] = "backoff"
            continue
        try:
            if not made:
                made.append(document())
            _DELIVER[name](made[0])
        except Exception as exc:  # a sink's failure is recorded and caught up later, never raised into a seal
            logger.warning("witness %s: could not deliver checkpoint #%s: %s", row, seq, exc)
            _record(row, seq=None, error=_error_text(exc))
            done[row] = f"failed: {_error_text(exc)}"
        else:
            _record(row, seq=seq)
            done[row] = f"delivered #{seq}"
    return done


def after_seal(seq: int, hash_: str) -> None:
    """transaction.on_commit hook of every seal: the run's transaction has committed."""
    witness_publish(head=(seq, hash_))


@dataclass(frozen=True)
class WitnessedChain:
    """Another chain whose head the sinks are given (review.witness, review.trust_chain)."""

    name: str  # its sinks' rows are "<name>-file", "<name>-http"; its section of witness_status
    kind: str  # the checkpoint document's kind
    message: Callable[[dict], bytes]  # the bytes its checkpoint's signature covers
    head: Callable[[], tuple[int, str]]  # (seq, hash) of its newest record now; seq 0 when empty
    made_at: Callable[[int], object]  # when record #seq was written (None: no such record)

    @property
    def prefix(self) -> str:
        return f"{self.name}-"


OTHER_CHAINS: list[WitnessedChain] = []


def chain_checkpoint(chain: WitnessedChain, seq: int, head: str) -> dict:
    """A newly signed checkpoint of `chain` at #seq."""
    key_id, _key = signing.signing_key()
    document = {"v": 1, "kind": chain.kind, "seq": seq, "head": head, "at": _iso(timezone.now()), "key_id": key_id}
    return document | {"signature": signing.sign(chain.message(document))}


def chain_publish(chain: WitnessedChain, *, head: tuple[int, str] | None = None, force: bool = False) -> dict:
    """Give every sink `chain`'s head (by default as it is now), unless it has it. Not bound by the
    interval: these chains grow at a person's pace. `force`: sinks in backoff too. An empty chain
    has nothing to witness and says nothing."""
    names = sinks()
    seq, hash_ = head or chain.head()
    if not seq:
        return {}
    return _give(names, seq=seq, document=lambda: chain_checkpoint(chain, seq, hash_), force=force,
                 prefix=chain.prefix)


def witness_catch_up() -> dict:
    """The reconciler's part: every sink brought to every chain's head, however long it was down."""
    done = witness_publish(force=True)
    for chain in OTHER_CHAINS:
        done |= chain_publish(chain, force=True)
    return done


def _sinks_behind(head_seq: int, *, prefix: str, made_at, unit: str) -> dict:
    """For each sink: whether it has the head, how many records it lacks and since when."""
    names = sinks()
    state = {s.name: s for s in WitnessSink.objects.filter(name__in=[prefix + name for name in names])}
    now, found = timezone.now(), {}
    grace = max(2 * settings.WARRANT_WITNESS_INTERVAL_SECONDS, 60)
    for name in names:
        sink = state.get(prefix + name)
        delivered = sink.delivered_seq if sink else 0
        behind = head_seq - delivered  # negative: the sink was given a head the chain no longer has
        oldest = made_at(delivered + 1) if behind > 0 else None
        waiting = (now - oldest).total_seconds() if oldest else 0.0
        failing = bool(sink and sink.failed_at)
        found[name] = {
            "ok": not failing and waiting <= grace and behind >= 0, "delivered_seq": delivered, f"behind_{unit}": behind,
            "behind_seconds": round(waiting, 1), "error": sink.error if failing else "",
            "failing_since": _iso(sink.failed_at) if failing else None,
        }
    return found


def _receipt_made_at(seq: int):
    return Receipt.objects.filter(seq=seq).values_list("created_at", flat=True).first()


def witness_status() -> dict:
    """How far behind each sink is (receipts not yet witnessed, and since when): for /readyz. Each
    other chain has a section of its own, by its name, which `ok` covers too."""
    head = _head()
    head_seq = head[0] if head else 0
    result = {"head_seq": head_seq, "sinks": _sinks_behind(head_seq, prefix="", made_at=_receipt_made_at,
                                                           unit="receipts")}
    sections = [result["sinks"]]
    for chain in OTHER_CHAINS:
        seq = chain.head()[0]
        result[chain.name] = {"head_seq": seq, "sinks": _sinks_behind(seq, prefix=chain.prefix, made_at=chain.made_at,
                                                                      unit="records")}
        sections.append(result[chain.name]["sinks"])
    result["ok"] = all(s["ok"] for section in sections for s in section.values())
    return result


def witness_file_checkpoints(kind: str = "") -> tuple[list[dict], list[str]]:
    """The checkpoints in the witness file, and a reason for every line that is not one. `kind`:
    those of another chain (REVIEW_CHECKPOINT_KIND); by default every line that is not another
    chain's, so a line of no kind at all is still held against the receipts and reported."""
    others = {chain.kind for chain in OTHER_CHAINS} | {REVIEW_CHECKPOINT_KIND, TRUST_CHECKPOINT_KIND}
    path = Path(settings.WARRANT_WITNESS_FILE) if settings.WARRANT_WITNESS_FILE else None
    if path is None or not path.exists():
        return [], []
    found, bad = [], []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                document = json.loads(line)
            except ValueError:
                bad.append(f"line {number}: not JSON")
                continue
            if isinstance(document, dict):
                if (document.get("kind") == kind) if kind else (document.get("kind") not in others):
                    found.append(document | {"_line": number})
            else:
                bad.append(f"line {number}: not a checkpoint object")
    return found, bad
