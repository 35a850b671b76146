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


@pytest.mark.django_db(transaction=True)
def test_the_process_breaker_reads_a_healthy_profile_once_for_the_runs_that_follow(demo):
    """runs.advance keeps one breaker a process: the second run in a row reads no health row."""
    from django.contrib.auth.models import User

    from runs.services import run_start

    caller = User.objects.get(username="operator")

    def health_reads() -> int:
        with CaptureQueriesContext(connection) as queries:
            run, _ = run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?", caller=caller)
        run.refresh_from_db()
        assert run.status == "succeeded"
        return sum('"agents_modelprofilehealth"' in q["sql"] and q["sql"].startswith("SELECT") for q in queries)

    health_reads()  # its success leaves the row clean and recent (or finds it so)
    health_reads()
    assert health_reads() == 0


def test_its_thresholds_are_the_settings_of_the_moment_unless_given(settings):
    breaker = DatabaseBreaker()
    settings.WARRANT = settings.WARRANT | {"MODEL_BREAKER_FAILURES": 7, "MODEL_BREAKER_COOLDOWN_SECONDS": 9}
    assert (breaker.failures, breaker.cooldown) == (7, timedelta(seconds=9))
    assert DatabaseBreaker(failures=2, cooldown_seconds=3).failures == 2
