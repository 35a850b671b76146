"""The breaker writes a success only when it changes something the next caller would read."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.breaker import DatabaseBreaker
from agents.models import ModelProfileHealth

pytestmark = pytest.mark.django_db


def _success(breaker: DatabaseBreaker, profile: str = "p") -> list[str]:
    """allow() then succeeded(), as the router calls them; the SQL succeeded() sent."""
    assert breaker.allow(profile)
    with CaptureQueriesContext(connection) as queries:
        breaker.succeeded(profile, latency_ms=5)
    return [q["sql"] for q in queries]


def test_a_clean_recent_row_is_not_written_again():
    ModelProfileHealth.objects.create(profile_name="p", last_success_at=timezone.now())
    assert _success(DatabaseBreaker()) == []


def test_failures_in_a_row_are_reset_by_a_success():
    ModelProfileHealth.objects.create(profile_name="p", consecutive_failures=2, last_success_at=timezone.now())
    assert _success(DatabaseBreaker())
    assert ModelProfileHealth.objects.get(profile_name="p").consecutive_failures == 0


def test_an_old_success_is_moved_forward():
    old = timezone.now() - timedelta(minutes=5)
    ModelProfileHealth.objects.create(profile_name="p", last_success_at=old)
    _success(DatabaseBreaker())
    assert ModelProfileHealth.objects.get(profile_name="p").last_success_at > old


def test_a_failure_between_the_read_and_the_success_is_not_mistaken_for_clean():
    ModelProfileHealth.objects.create(profile_name="p", last_success_at=timezone.now())
    breaker = DatabaseBreaker(failures=3)
    assert breaker.allow("p")
    breaker.failed("p", error="HTTP 503", counts=True)
    breaker.succeeded("p", latency_ms=5)
    assert ModelProfileHealth.objects.get(profile_name="p").consecutive_failures == 0


def test_the_first_success_creates_the_row():
    _success(DatabaseBreaker())
    assert ModelProfileHealth.objects.get(profile_name="p").last_latency_ms == 5


def test_a_healthy_row_is_read_once_for_the_calls_that_follow():
    """A slice's breaker reads a healthy profile's row before its first call only; a failure it
    sees itself makes the next call read the row again."""
    ModelProfileHealth.objects.create(profile_name="p", last_success_at=timezone.now())
    breaker = DatabaseBreaker(failures=3)
    assert _success(breaker) == []
    with CaptureQueriesContext(connection) as queries:
        assert breaker.allow("p")
        breaker.succeeded("p", latency_ms=5)
    assert len(queries) == 0
    breaker.failed("p", error="HTTP 503", counts=True)
    with CaptureQueriesContext(connection) as queries:
        assert breaker.allow("p")
    assert len(queries) == 1
