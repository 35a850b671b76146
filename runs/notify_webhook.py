"""The notification webhook: each approval notice as a signed JSON POST to one URL (optional).

Settings (warrant/mail_config.py): WARRANT_NOTIFY_WEBHOOK_URL (empty: no webhook), its secret
WARRANT_NOTIFY_WEBHOOK_SECRET (required: an unsigned notice could be forged by anyone who can
reach the receiver, so without a secret nothing is sent), WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS
(the egress allow-list, core.egress) and WARRANT_NOTIFY_WEBHOOK_TIMEOUT (seconds, 5).

The receiver checks

    X-Warrant-Signature: sha256=<hex HMAC-SHA256(secret, X-Warrant-Timestamp + "." + body)>

over the body's exact bytes, and refuses a timestamp (Unix seconds) far from its own clock, so a
notice captured on the way cannot be replayed later. verify() is that check, for receivers in
Python and for the tests.
"""

import hashlib
import hmac
import json
import logging
import time

import httpx
from django.conf import settings

from core import egress

logger = logging.getLogger(__name__)

SIGNATURE_HEADER, TIMESTAMP_HEADER = "X-Warrant-Signature", "X-Warrant-Timestamp"
ALLOWED_HOSTS_SETTING = "WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS"


def setting(name: str, default):
    """A notification setting (warrant/mail_config.py), or `default` under a settings module
    that does not import it."""
    return getattr(settings, name, default)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: str, body: bytes, signature: str, *, now: float | None = None,
           tolerance_seconds: int = 300) -> bool:
    """Whether `signature` signs `timestamp` and `body` with `secret`, and `timestamp` is recent."""
    try:
        age = abs((time.time() if now is None else now) - int(timestamp))
    except ValueError:
        return False
    return age <= tolerance_seconds and hmac.compare_digest(sign(secret, timestamp, body), signature)


def deliver(facts: dict, *, counts: tuple, problems: list | None = None) -> bool:
    """POST `facts` if a webhook is configured; True when it answered 2xx. Never raises: a
    failure is logged, added to counts[1]["webhook"] (a success to counts[0]) and said in
    `problems` (why, without the URL), so the caller may keep it to retry. Not configured: False,
    and no problem."""
    url = setting("WARRANT_NOTIFY_WEBHOOK_URL", "")
    if not url:
        return False
    sent, failures = counts
    secret = setting("WARRANT_NOTIFY_WEBHOOK_SECRET", "")
    if not secret:
        # Not retried: a configuration that a retry cannot mend, and logged as an error each time.
        failures["webhook"] += 1
        logger.error("notify: WARRANT_NOTIFY_WEBHOOK_URL is set without WARRANT_NOTIFY_WEBHOOK_SECRET; "
                     "the %s notice was not sent", facts.get("event"))
        return False
    body = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp,
               SIGNATURE_HEADER: sign(secret, timestamp, body)}
    timeout = setting("WARRANT_NOTIFY_WEBHOOK_TIMEOUT", 5.0)
    try:
        with egress.client(allowed_hosts=setting(ALLOWED_HOSTS_SETTING, ()), setting=ALLOWED_HOSTS_SETTING,
                           timeout=httpx.Timeout(timeout), follow_redirects=False) as client:
            response = client.post(url, content=body, headers=headers)
    except (egress.EgressRefused, httpx.HTTPError) as exc:
        failures["webhook"] += 1
        # The URL is not logged (it may carry a token); the reason is.
        logger.warning("notify: the webhook was not reached for the %s notice: %s", facts.get("event"), exc)
        if not isinstance(exc, egress.EgressRefused):  # a host off the allow-list stays off it: no retry
            _say(problems, f"not reached: {type(exc).__name__}: {exc}")
        return False
    if not 200 <= response.status_code < 300:
        failures["webhook"] += 1
        logger.warning("notify: the webhook answered %s to the %s notice", response.status_code, facts.get("event"))
        _say(problems, f"answered {response.status_code}")
        return False
    sent["webhook"] += 1
    return True


def _say(problems: list | None, why: str) -> None:
    if problems is not None:
        problems.append(why)
