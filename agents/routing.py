"""Reliability around any backend: retries with backoff, the circuit breaker, the fallback chain.

Pure of Django: the breaker, the clock, the sleep and the randomness are handed in, so this is
tested without a database and without waiting. Every attempt (made or skipped) is returned as a
plain dict on the response or the exception, for the run to record as a trace event.

Per profile: retry what may pass on a second try (429, 5xx, timeouts, lost connections,
garbage) up to the profile's max_retries, with exponential backoff and jitter, never waiting
less than Retry-After, and never past the retry budget; a garbled reply is re-asked once only.
Any other 4xx, a missing key, or an open breaker moves on to the next profile at once.
"""

import random
import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol

from agents.backends.base import AttemptFailed, ModelOutputInvalid, ModelRequest, ModelResponse, ModelUnavailable

# Failures that say nothing about the server's health: the breaker does not count them.
NOT_THE_SERVERS_FAULT = {"client_error", "config", "backend_error"}


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float = 0.5
    max_seconds: float = 8.0
    budget_seconds: float = 30.0  # per profile: attempts and waits together


class Breaker(Protocol):
    def allow(self, profile: str) -> bool: ...
    def succeeded(self, profile: str, *, latency_ms: int) -> None: ...
    def failed(self, profile: str, *, error: str, counts: bool) -> bool: ...  # True when it just opened


class NoBreaker:
    def allow(self, profile: str) -> bool:
        return True

    def succeeded(self, profile: str, *, latency_ms: int) -> None:
        pass

    def failed(self, profile: str, *, error: str, counts: bool) -> bool:
        return False


MIN_ATTEMPT_SECONDS = 1.0  # less time than this left is no attempt worth starting


def backoff(number: int, policy: RetryPolicy, rng: Callable[[], float]) -> float:
    """Seconds to wait after failed attempt `number` (1-based): exponential, with equal jitter."""
    ceiling = min(policy.max_seconds, policy.base_seconds * 2 ** (number - 1))
    return ceiling / 2 + rng() * ceiling / 2


@dataclass
class Router:
    make_backend: Callable[[dict], object]
    breaker: Breaker
    policy: RetryPolicy = RetryPolicy()
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: Callable[[], float] = random.random
    # Seconds the whole chain may take (attempts, waits, fallbacks), or None. A step runs inside a
    # task with a time limit: a chain that outlived it would lose its attempts and its fallbacks.
    total_seconds: float | None = None

    def complete(self, request: ModelRequest, chain: list[dict]) -> ModelResponse:
        """The first reply from the chain (the requested profile, then its fallbacks in order)."""
        attempts: list[dict] = []
        self._deadline = None if self.total_seconds is None else self.clock() + self.total_seconds
        for profile in chain:
            left = self._left()
            if left is not None and left < MIN_ATTEMPT_SECONDS:
                attempts.append(_attempt(profile, 0, "skipped", kind="time_up",
                                         error="the step's time for model calls is used up"))
                continue
            if not self.breaker.allow(profile["name"]):
                attempts.append(_attempt(profile, 0, "skipped", kind="circuit_open",
                                         error="the circuit breaker is open: recent calls failed"))
                continue
            response = self._try_profile(request, profile, attempts)
            if response is not None:
                return replace(response, profile=profile["name"], attempts=tuple(attempts))
        tried = ", ".join(dict.fromkeys(a["profile"] for a in attempts)) or "none"
        raise ModelUnavailable(f"no model profile answered (tried: {tried})", attempts=tuple(attempts))

    def _left(self) -> float | None:
        return None if self._deadline is None else self._deadline - self.clock()

    def _capped(self, profile: dict) -> dict:
        """The profile with timeouts no longer than what is left: no attempt outlasts the chain's time."""
        left = self._left()
        if left is None:
            return profile
        return profile | {"connect_timeout": min(float(profile["connect_timeout"]), left),
                          "read_timeout": min(float(profile["read_timeout"]), left)}

    def _try_profile(self, request: ModelRequest, profile: dict, attempts: list[dict]) -> ModelResponse | None:
        request = replace(request, model=profile["model"])
        started, garbled = self.clock(), 0
        for number in range(1, int(profile.get("max_retries", 0)) + 2):
            try:
                backend = self.make_backend(self._capped(profile))
            except Exception as exc:  # noqa: BLE001 - a profile naming a backend that cannot be built
                attempts.append(_attempt(profile, number, "failed", kind="backend_error",
                                         error=f"{type(exc).__name__}: {exc}"))
                return None
            began = self.clock()
            try:
                response = backend.complete(request)
            except AttemptFailed as exc:
                failure = exc
            except ModelUnavailable as exc:  # a plug-in backend's way of saying "not now"
                failure = AttemptFailed("unavailable", str(exc), retryable=True)
            except ModelOutputInvalid as exc:
                latency = _ms(self.clock() - began)
                self.breaker.succeeded(profile["name"], latency_ms=latency)  # the server is fine; the model is not
                attempts.append(_attempt(profile, number, "invalid_output", kind="invalid_output", error=exc.problem,
                                         latency_ms=latency))
                exc.profile, exc.attempts = profile["name"], tuple(attempts)
                raise
            except Exception as exc:  # noqa: BLE001 - a backend's own bug: recorded, and the next fallback tried
                failure = AttemptFailed("backend_error", f"{type(exc).__name__}: {exc}"[:300])
            else:
                latency = _ms(self.clock() - began)
                self.breaker.succeeded(profile["name"], latency_ms=latency)
                attempts.append(_attempt(profile, number, "ok", latency_ms=latency, model=response.model))
                return response
            record = _attempt(profile, number, "failed", kind=failure.kind, error=str(failure),
                              latency_ms=_ms(self.clock() - began), status=failure.status,
                              retry_after_s=failure.retry_after)
            attempts.append(record)
            if self.breaker.failed(profile["name"], error=str(failure), counts=failure.kind not in NOT_THE_SERVERS_FAULT):
                record["breaker_opened"] = True
            garbled += failure.kind == "bad_reply"
            if not failure.retryable or number > int(profile.get("max_retries", 0)) or garbled > 1:
                return None
            wait = max(backoff(number, self.policy, self.rng), failure.retry_after or 0.0)
            left = self._left()
            if left is not None and wait + MIN_ATTEMPT_SECONDS > left:
                record["gave_up"] = f"waiting {wait:.1f} s would pass the step's time for model calls"
                return None
            if self.clock() - started + wait > self.policy.budget_seconds:
                record["gave_up"] = f"waiting {wait:.1f} s would pass the retry budget of {self.policy.budget_seconds:g} s"
                return None
            if not self.breaker.allow(profile["name"]):
                record["gave_up"] = "the circuit breaker opened"
                return None
            record["wait_ms"] = _ms(wait)
            self.sleep(wait)
        return None


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _attempt(profile: dict, number: int, outcome: str, *, kind: str = "", error: str = "", latency_ms: int = 0,
             status: int | None = None, retry_after_s: float | None = None, model: str = "") -> dict:
    record = {"profile": profile["name"], "backend": profile["backend"], "model": model or profile["model"],
              "attempt": number, "outcome": outcome, "latency_ms": latency_ms}
    if kind:
        record["kind"] = kind
    if error:
        record["error"] = error[:300]
    if status is not None:
        record["status"] = status
    if retry_after_s is not None:
        record["retry_after_s"] = round(retry_after_s, 3)
    return record
