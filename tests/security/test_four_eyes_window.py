"""The second-admin window has one boundary for every four-eyes request: a request may be confirmed
until the window ends, not at its end, as a trust proposal stops at its expires_at."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.four_eyes import RequestExpired, check_fresh, is_fresh


@pytest.fixture
def window(settings):
    settings.WARRANT = settings.WARRANT | {"SECOND_ADMIN_WINDOW_HOURS": 24}
    return timedelta(hours=24)


def test_a_request_is_fresh_until_the_window_ends_and_not_at_its_end(window):
    asked = timezone.now() - timedelta(days=3)
    assert is_fresh(asked, now=asked + window - timedelta(microseconds=1))
    assert not is_fresh(asked, now=asked + window)
    assert not is_fresh(None, now=asked)


def test_a_request_past_the_window_is_refused_with_request_expired(window):
    check_fresh(timezone.now() - window + timedelta(minutes=1), what="the emergency activation")
    with pytest.raises(RequestExpired, match="24 hours ago or more"):
        check_fresh(timezone.now() - window, what="the emergency activation")
    check_fresh(None, what="nothing asked")  # nothing was asked for: nothing to refuse
