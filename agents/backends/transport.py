"""One HTTP attempt for the HTTP backends: explicit timeouts, a bounded reply, typed failures.

Everything that can go wrong on the wire becomes an AttemptFailed with a kind and whether a
retry may help; agents.routing decides what to do about it. The key is read from the profile's
environment variable at call time and redacted from every message this module writes.
"""

import email.utils
import json
import math
import os
import time

import httpx
from django.conf import settings

from agents.backends.base import AttemptFailed
from core import egress

# A chat reply with tool calls is a few kilobytes; anything near a megabyte is a runaway or an
# attack, and is refused before it is parsed (so no tool in it can run).
MAX_REPLY_BYTES = 512 * 1024
RETRYABLE_4XX = {408, 425}  # request timeout, too early: the same request may succeed
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0  # a server's wish, bounded; the retry budget decides anyway


def api_key(profile: dict) -> str:
    """The key from the environment, or "" for servers without one (Ollama, llama.cpp, vLLM)."""
    name = profile.get("api_key_env") or ""
    if not name:
        return ""
    from agents.services import platform_secret, secret_env_allowed

    if platform_secret(name) or not secret_env_allowed(name):
        # A profile saved before the list narrowed (or existed): its value is not sent anywhere.
        raise AttemptFailed("config", f"the key variable {name} is not among those this deployment lets profiles "
                                      "send (WARRANT_SECRET_ENV_ALLOWED)")
    value = os.environ.get(name, "")
    if not value:
        raise AttemptFailed("config", f"the key variable is not set in this process's environment: {name}")
    return value


def redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds, from either form the RFC allows (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        # "inf", "nan" and "1e999" parse as floats too; none may reach an event (JSON has no infinity).
        return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return min(max(0.0, when.timestamp() - (time.time() if now is None else now)), MAX_RETRY_AFTER_SECONDS)


def _egress_rule() -> dict:
    """Model servers only where the platform engineer allows (core/egress.py: the hosts of
    WARRANT_MODEL_ALLOWED_HOSTS when set, and never a loopback, private or link-local address that is
    not listed): a profile is data an admin edits, and must not turn the worker into a client of any
    address. The rule is applied to the address actually connected to, before anything is sent."""
    return {"allowed_hosts": settings.WARRANT.get("MODEL_ALLOWED_HOSTS") or (), "setting": "WARRANT_MODEL_ALLOWED_HOSTS"}


def post_json(profile: dict, path: str, payload: dict, *, headers: dict, secret: str = "") -> dict:
    """POST `payload` to base_url + path and return the JSON object it answers, or raise AttemptFailed."""
    connect, read = float(profile["connect_timeout"]), float(profile["read_timeout"])
    url = (profile.get("base_url") or "").rstrip("/") + path
    # read_timeout bounds the whole reply, not just the gap between two bytes: a server that
    # trickles a byte a second would otherwise hold the worker forever.
    rule = _egress_rule()
    deadline = time.monotonic() + connect + read
    timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
    try:
        with egress.client(**rule, timeout=timeout, follow_redirects=False) as client:
            with client.stream("POST", url, json=payload, headers=headers) as response:
                status = response.status_code
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
                    raise _too_large(status)
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_REPLY_BYTES:
                        raise _too_large(status)
                    if time.monotonic() > deadline:
                        raise AttemptFailed("timeout", f"the reply took longer than {read:g} s", retryable=True)
                retry_after = retry_after_seconds(response.headers.get("retry-after"))
    except egress.EgressRefused as exc:
        raise AttemptFailed("config", f"the profile's server may not be reached: {exc}") from None
    except httpx.TimeoutException as exc:
        raise AttemptFailed("timeout", f"{_timeout_phase(exc)} timed out", retryable=True) from None
    except httpx.RemoteProtocolError:
        raise AttemptFailed("bad_reply", "the reply was cut off or malformed at the HTTP level", retryable=True) from None
    except httpx.TransportError as exc:
        raise AttemptFailed("connection", redact(f"cannot reach the server: {type(exc).__name__}", secret),
                            retryable=True) from None
    if status >= 300:
        raise _http_error(status, bytes(body), retry_after, secret)
    try:
        value = json.loads(bytes(body))
    except ValueError:
        raise AttemptFailed("bad_reply", f"HTTP {status} but the body is not JSON", status=status,
                            retryable=True) from None
    if not isinstance(value, dict):
        raise AttemptFailed("bad_reply", "the body is JSON but not an object", status=status, retryable=True)
    return value


def _too_large(status: int) -> AttemptFailed:
    return AttemptFailed("bad_reply", f"the reply is larger than {MAX_REPLY_BYTES} bytes", status=status,
                         retryable=True)


def _timeout_phase(exc: httpx.TimeoutException) -> str:
    return {httpx.ConnectTimeout: "connecting", httpx.ReadTimeout: "waiting for the reply",
            httpx.WriteTimeout: "sending the request", httpx.PoolTimeout: "waiting for a connection"}.get(
        type(exc), "the request")


def _http_error(status: int, body: bytes, retry_after: float | None, secret: str) -> AttemptFailed:
    detail = _server_message(body, secret)
    message = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status == 429:
        return AttemptFailed("rate_limited", message, status=status, retryable=True, retry_after=retry_after)
    if status >= 500:
        return AttemptFailed("server_error", message, status=status, retryable=True, retry_after=retry_after)
    return AttemptFailed("client_error", message, status=status, retryable=status in RETRYABLE_4XX,
                         retry_after=retry_after)


def _server_message(body: bytes, secret: str = "") -> str:
    """The server's own error message (both protocols nest it under "error"), redacted, then kept
    short (in that order: a key cut in half by the truncation would no longer be found)."""
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict):
        error = error.get("message") or error.get("type")
    return redact(str(error), secret)[:200] if error else ""
