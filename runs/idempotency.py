"""Idempotency-Key for POSTs that change things, in the manner of Stripe's API.

The same key with the same body gets the stored response again, or what the view's `replay`
makes of it (with Idempotent-Replayed: true); the same key with another body is 422; a request
whose twin is still being processed is 409. Only what was carried out is stored: after an error
answer the key is free again. Keys belong to a user.
"""

import hashlib
import json
from functools import wraps

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.response import Response

from core.api_errors import Conflict, Unprocessable
from runs.models import IdempotencyRecord

HEADER = "Idempotency-Key"


def _fingerprint(request) -> str:
    body = dict(request.data) if hasattr(request.data, "keys") else request.data
    if isinstance(body, dict):
        body.pop("idempotency_key", None)
    text = json.dumps([request.method, request.path, body], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def request_key(request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None and hasattr(request.data, "get"):
        key = request.data.get("idempotency_key")
    if key is None:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= 128:
        raise Unprocessable("an Idempotency-Key has 1 to 128 characters", details={"idempotency_key": str(key)[:140]})
    return key


ABANDONED_AFTER = timedelta(seconds=120)


def _abandoned(record: IdempotencyRecord) -> bool:
    return timezone.now() - record.created_at > ABANDONED_AFTER


def idempotent(view_method=None, *, replay=None):
    """Wrap a POST handler of an APIView. `replay(view, request, stored_body)`, when given,
    answers a replayed key instead of the stored response (e.g. with the object as it is now)."""
    if view_method is None:
        return lambda method: idempotent(method, replay=replay)

    @wraps(view_method)
    def wrapper(view, request, *args, **kwargs):
        key = request_key(request)
        if key is None:
            return view_method(view, request, *args, **kwargs)
        fingerprint = _fingerprint(request)
        try:
            with transaction.atomic():
                record = IdempotencyRecord.objects.create(user=request.user, key=key, request_sha256=fingerprint)
        except IntegrityError:
            existing = IdempotencyRecord.objects.get(user=request.user, key=key)
            if existing.request_sha256 != fingerprint:
                raise Unprocessable("this Idempotency-Key was used with a different request",
                                    details={"idempotency_key": key}) from None
            if existing.state == IdempotencyRecord.State.IN_PROGRESS and not _abandoned(existing):
                raise Conflict("a request with this Idempotency-Key is still being processed; retry shortly",
                               details={"idempotency_key": key}) from None
            if existing.state == IdempotencyRecord.State.DONE:
                response = (replay(view, request, existing.response_body) if replay is not None
                            else Response(existing.response_body, status=existing.response_status))
                response["Idempotent-Replayed"] = "true"
                return response
            record = existing  # its first request died without an answer: this one takes over
        try:
            response = view_method(view, request, *args, **kwargs)
        except Exception as exc:
            response = view.handle_exception(exc)
        if response.status_code >= 400:
            # Only what was done is kept: after a refusal (a body to correct, a decision taken
            # already) or a failure the key is free again, so the corrected request may reuse it.
            record.delete()
        else:
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                state=IdempotencyRecord.State.DONE, response_status=response.status_code, response_body=response.data)
        return response

    return wrapper
