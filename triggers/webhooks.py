"""A webhook delivery: checked in the order that costs an attacker most and us least.

1. the trigger exists and is a webhook (404);
2. the body is no larger than the trigger allows (413), read no further than that;
3. the signature over the timestamp and the raw body verifies under the trigger's secret (401);
4. the timestamp is inside the replay window (401: a stale signature is not a valid one now);
5. the delivery id, and the signed message itself, were not accepted before (409): the database's
   unique constraints decide, so two copies racing each other cannot both start a run;
6. the body is JSON and meets the trigger's schema, if it declares one (400, 422: recorded);
then the fire (triggers.firing). Nothing before step 5 writes anything: a flood of bad signatures
leaves no rows.
"""

import json
import logging
import time

import jsonschema
from django.db import IntegrityError
from rest_framework import status

from core.api_errors import Conflict, DomainError, NotFound, Unprocessable
from triggers import firing, secrets, signatures
from triggers.models import Trigger, TriggerFire

logger = logging.getLogger(__name__)

TIMESTAMP = "HTTP_X_WARRANT_TIMESTAMP"
SIGNATURE = "HTTP_X_WARRANT_SIGNATURE"
DELIVERY = "HTTP_X_WARRANT_DELIVERY"
MAX_DELIVERY_ID = 200
CHALLENGE = 'Warrant-Signature headers="X-Warrant-Timestamp X-Warrant-Signature", algorithm="HMAC-SHA256"'


class BadSignature(DomainError):
    status_code = status.HTTP_401_UNAUTHORIZED
    code = "bad_signature"


class StaleSignature(BadSignature):
    code = "stale_signature"


class PayloadTooLarge(DomainError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    code = "too_large"


class InvalidPayload(DomainError):
    code = "invalid"


def webhook_trigger(name: str) -> Trigger:
    trigger = Trigger.objects.filter(name=name, kind=Trigger.Kind.WEBHOOK).select_related("agent").first()
    if trigger is None:
        raise NotFound(f"there is no webhook trigger {name!r}")
    return trigger


def read_body(stream, meta: dict, limit: int) -> bytes:
    """The raw body, refused past `limit` bytes whether or not Content-Length says so."""
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise PayloadTooLarge(f"the payload is larger than {limit} bytes", details={"limit": limit})
    body = stream.read(limit + 1) if stream is not None else b""
    if len(body) > limit:
        raise PayloadTooLarge(f"the payload is larger than {limit} bytes", details={"limit": limit})
    return body


def authenticate(trigger: Trigger, meta: dict, body: bytes, *, now: float) -> str:
    """The signed message's digest, once the signature holds and is fresh."""
    timestamp, header = meta.get(TIMESTAMP, ""), meta.get(SIGNATURE, "")
    seconds = signatures.parse_timestamp(timestamp)
    if seconds is None or not signatures.valid(secrets.unseal(trigger.secret_encrypted), timestamp, body, header):
        logger.warning("trigger %s: delivery refused: bad signature", trigger.name)
        raise BadSignature("the signature does not verify: X-Warrant-Signature must be sha256=HMAC-SHA256 "
                           "of '<X-Warrant-Timestamp>.<raw body>' under the trigger's secret")
    if abs(now - seconds) > trigger.replay_window_seconds:
        raise StaleSignature(f"the signature is older than the replay window ({trigger.replay_window_seconds} s)",
                             details={"window_seconds": trigger.replay_window_seconds})
    return signatures.digest(signatures.message(timestamp, body))


def delivery_id_of(meta: dict) -> str:
    value = meta.get(DELIVERY, "").strip()
    if len(value) > MAX_DELIVERY_ID or not value.isprintable():
        raise InvalidPayload(f"X-Warrant-Delivery is at most {MAX_DELIVERY_ID} printable characters")
    return value


def _seen(trigger: Trigger, delivery_id: str, message_sha256: str) -> bool:
    fires = TriggerFire.objects.filter(trigger=trigger)
    return (fires.filter(message_sha256=message_sha256).exists()
            or (bool(delivery_id) and fires.filter(delivery_id=delivery_id).exists()))


def _replay(delivery_id: str) -> Conflict:
    return Conflict("this delivery was accepted before: each delivery id and signed message is accepted once",
                    details={"delivery_id": delivery_id})


def receive(name: str, *, stream, meta: dict, now: float | None = None) -> TriggerFire:
    """One delivery to the trigger called `name`: its fire, or the refusal (a DomainError)."""
    trigger = webhook_trigger(name)
    body = read_body(stream, meta, trigger.max_payload_bytes)
    message_sha256 = authenticate(trigger, meta, body, now=time.time() if now is None else now)
    delivery_id = delivery_id_of(meta)
    if _seen(trigger, delivery_id, message_sha256):
        raise _replay(delivery_id)
    try:
        payload, problem = json.loads(body.decode("utf-8")), None
    except (UnicodeDecodeError, json.JSONDecodeError):
        payload, problem = None, InvalidPayload("the payload is not JSON")
    if problem is None and trigger.payload_schema:
        errors = sorted(jsonschema.Draft202012Validator(trigger.payload_schema).iter_errors(payload), key=str)
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            problem = Unprocessable(f"the payload does not meet the trigger's schema at {where}: {errors[0].message}",
                                    details={"path": where})
    kwargs = {"kind": Trigger.Kind.WEBHOOK, "payload_sha256": signatures.digest(body), "delivery_id": delivery_id,
              "message_sha256": message_sha256}
    try:
        if problem is not None:
            # A signed delivery the trigger cannot use is part of its history (and still accepted once).
            TriggerFire.objects.create(trigger=trigger, outcome=TriggerFire.Outcome.REFUSED,
                                       reason=problem.message[:300], **kwargs)
            raise problem
        return firing.fire(trigger, payload=payload, **kwargs)
    except IntegrityError:
        raise _replay(delivery_id) from None
