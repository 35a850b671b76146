from django.test import override_settings

from governance.checks import lease_outlives_a_task


def _warrant(**changes):
    from django.conf import settings

    return {**settings.WARRANT, **changes}


def test_it_warns_when_a_lease_could_end_while_a_task_still_runs():
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False, CELERY_TASK_TIME_LIMIT=150,
                           WARRANT=_warrant(LEASE_SECONDS=60)):
        assert [w.id for w in lease_outlives_a_task(None)] == ["governance.W001"]


def test_it_is_quiet_when_the_lease_outlives_the_time_limit():
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False, CELERY_TASK_TIME_LIMIT=150,
                           WARRANT=_warrant(LEASE_SECONDS=300)):
        assert lease_outlives_a_task(None) == []


def test_it_warns_when_rate_limits_are_counted_per_process():
    from governance.checks import rate_limits_are_shared

    for per_process in ("locmem.LocMemCache", "dummy.DummyCache"):  # counted alone, or not at all
        with override_settings(CACHES={"default": {"BACKEND": f"django.core.cache.backends.{per_process}"}}):
            assert [w.id for w in rate_limits_are_shared(None)] == ["governance.W004"]
    shared = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6399/1"}}
    with override_settings(CACHES=shared):
        assert rate_limits_are_shared(None) == []
