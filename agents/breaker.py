"""The circuit breaker, kept in the database so every worker process shares it.

With no broker (the embedded default) there is one process, and the same table serves it. A
profile whose server failed MODEL_BREAKER_FAILURES attempts in a row is skipped for
MODEL_BREAKER_COOLDOWN_SECONDS; then exactly one caller (a compare-and-set on opened_until)
probes it, and a success closes the breaker for all. Slow I/O never happens under these locks.

One breaker object serves a worker process (runs.advance keeps one for every run it advances). It
reads a profile's row before a model call, and trusts a row it found healthy (closed, no failure
in a row, a success less than SUCCESS_WRITE_INTERVAL old) for the calls that follow, whichever run
makes them, without reading it again, until that success is as old as the interval or this object
sees a failure itself. So a worker learns of another's failures within seconds, not at its very
next call: the breaker spares a failing server its load, it does not decide whether a run may go
on. Its thresholds are read from settings at each use unless given.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from agents.models import ModelProfileHealth

logger = logging.getLogger(__name__)
SUCCESS_WRITE_INTERVAL = timedelta(seconds=5)


def _health(profile: str) -> tuple | None:
    """(opened_until, consecutive_failures, last_success_at), read by the profile's unique name."""
    return (ModelProfileHealth.objects.filter(profile_name=profile)
            .values_list("opened_until", "consecutive_failures", "last_success_at").first())


def breaker_state(health: ModelProfileHealth | None, now=None) -> str:
    if health is None or health.opened_until is None:
        return "closed"
    return "open" if health.opened_until > (now or timezone.now()) else "half_open"


class DatabaseBreaker:
    """The Breaker of agents.routing. If the database cannot answer it lets calls through: the
    breaker saves a dead server from load, it does not decide whether a run may proceed."""

    def __init__(self, *, failures: int | None = None, cooldown_seconds: float | None = None):
        self._failures, self._cooldown = failures, cooldown_seconds
        # Profiles whose row allow() last saw closed, with no failure and a recent success, and
        # that success's time: until it is SUCCESS_WRITE_INTERVAL old, allow() trusts the row
        # without reading it, and a success writes nothing (see succeeded). Threads of a process
        # share it: a lost update between two of them costs a read, never a call let through.
        self._clean: dict[str, object] = {}

    def forget(self) -> None:
        """Trust no row read before: the next call of each profile reads its row again."""
        self._clean.clear()

    @property
    def failures(self) -> int:
        return self._failures or settings.WARRANT["MODEL_BREAKER_FAILURES"]

    @property
    def cooldown(self) -> timedelta:
        return timedelta(seconds=self._cooldown or settings.WARRANT["MODEL_BREAKER_COOLDOWN_SECONDS"])

    def allow(self, profile: str) -> bool:
        now = timezone.now()
        last_success = self._clean.pop(profile, None)
        if last_success is not None and last_success > now - SUCCESS_WRITE_INTERVAL:
            self._clean[profile] = last_success
            return True
        try:
            row = _health(profile)
            opened_until = row[0] if row is not None else None
            if opened_until is None:
                if row is not None and row[1] == 0 and row[2] is not None and row[2] > now - SUCCESS_WRITE_INTERVAL:
                    self._clean[profile] = row[2]
                return True
            if opened_until > now:
                return False
            # Half open: whoever moves opened_until forward first is the one probe.
            return ModelProfileHealth.objects.filter(profile_name=profile, opened_until=opened_until).update(
                opened_until=now + self.cooldown) == 1
        except DatabaseError:
            logger.exception("circuit breaker of %s unreadable; letting the call through", profile)
            return True

    def succeeded(self, profile: str, *, latency_ms: int) -> None:
        if profile in self._clean:  # the row says what this success would write
            return
        now = timezone.now()
        rows = ModelProfileHealth.objects.filter(profile_name=profile)
        try:
            # Every worker succeeds on a busy profile many times a second: skip the write when it
            # would only move a recent last_success_at, so the row does not become a hot spot.
            changed = rows.exclude(consecutive_failures=0, opened_until=None,
                                   last_success_at__gt=now - SUCCESS_WRITE_INTERVAL).update(
                consecutive_failures=0, opened_until=None, last_success_at=now, last_latency_ms=latency_ms)
            if not changed and not rows.exists():  # the first success of a profile: its row
                ModelProfileHealth.objects.get_or_create(profile_name=profile, defaults={
                    "last_success_at": now, "last_latency_ms": latency_ms})
        except DatabaseError:
            logger.exception("could not record a success of %s", profile)

    def failed(self, profile: str, *, error: str, counts: bool) -> bool:
        self._clean.pop(profile, None)
        now = timezone.now()
        try:
            with transaction.atomic():
                ModelProfileHealth.objects.get_or_create(profile_name=profile)
                rows = ModelProfileHealth.objects.filter(profile_name=profile)
                rows.update(last_error_at=now, last_error=error[:300],
                            consecutive_failures=F("consecutive_failures") + (1 if counts else 0))
                # Open only from closed or half open, so an open breaker's deadline is not pushed out.
                opened = counts and rows.filter(consecutive_failures__gte=self.failures).exclude(
                    opened_until__gt=now).update(opened_until=now + self.cooldown) == 1
            if opened:
                logger.warning("circuit breaker of model profile %s opened: %s", profile, error)
            return opened
        except DatabaseError:
            logger.exception("could not record a failure of %s", profile)
            return False


def profile_health() -> list[dict]:
    """Every profile's health, for /readyz. Readiness is public: no URLs, no key names, and of the
    last error only its summary ("HTTP 503", "waiting for the reply timed out"), never the text a
    server sent back. The admin shows the whole message."""
    from agents.models import ModelProfile

    now = timezone.now()
    rows = {h.profile_name: h for h in ModelProfileHealth.objects.all()}
    out = []
    for profile in ModelProfile.objects.order_by("name"):
        health = rows.get(profile.name)
        out.append({
            "name": profile.name, "backend": profile.backend, "model": profile.model,
            "breaker": breaker_state(health, now),
            "consecutive_failures": health.consecutive_failures if health else 0,
            "last_success_at": _iso(health.last_success_at if health else None),
            "last_error_at": _iso(health.last_error_at if health else None),
            "last_error": health.last_error.split(": ", 1)[0] if health else "",
        })
    return out


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
