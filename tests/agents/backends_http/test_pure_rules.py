"""The pure rules under the backends: Retry-After parsing, backoff bounds. No server, no database."""

import email.utils

import pytest

from agents.backends.transport import redact, retry_after_seconds
from agents.routing import RetryPolicy, backoff

NOW = 1_800_000_000.0


@pytest.mark.parametrize("header, seconds", [
    ("5", 5.0),
    (" 0 ", 0.0),
    ("1.5", 1.5),
    ("-3", 0.0),
    (email.utils.formatdate(NOW + 42, usegmt=True), 42.0),
    (email.utils.formatdate(NOW - 42, usegmt=True), 0.0),
    ("soon", None),
    ("inf", None),
    ("nan", None),
    ("1e999", None),
    ("99999999999", 24 * 3600.0),
    ("", None),
    (None, None),
])
def test_retry_after_is_read_in_either_form_and_never_negative(header, seconds):
    assert retry_after_seconds(header, now=NOW) == seconds


def test_backoff_doubles_up_to_the_cap_with_jitter_between_half_and_all_of_it():
    policy = RetryPolicy(base_seconds=0.5, max_seconds=4, budget_seconds=30)
    assert [backoff(n, policy, lambda: 0.0) for n in range(1, 6)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert [backoff(n, policy, lambda: 1.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_redaction_replaces_every_occurrence_and_leaves_text_alone_without_a_key():
    assert redact("key sk-1 and again sk-1", "sk-1") == "key *** and again ***"
    assert redact("nothing to hide", "") == "nothing to hide"


def test_the_whole_chain_keeps_inside_its_time_and_caps_each_attempt():
    from agents.backends.base import AttemptFailed, ModelRequest, ModelUnavailable
    from agents.routing import NoBreaker, Router

    now = [0.0]
    seen_timeouts = []

    class Slow:
        def __init__(self, profile):
            self.profile = profile

        def complete(self, request):
            seen_timeouts.append((self.profile["name"], self.profile["read_timeout"]))
            now[0] += self.profile["read_timeout"]  # hangs until its read timeout
            raise AttemptFailed("timeout", "waiting for the reply timed out", retryable=True)

    def profile(name):
        return {"name": name, "backend": "openai", "model": "m", "connect_timeout": 5, "read_timeout": 60,
                "max_retries": 3}

    router = Router(make_backend=Slow, breaker=NoBreaker(), policy=RetryPolicy(0.5, 1, 1000),
                    sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0], rng=lambda: 0.0,
                    total_seconds=100)
    request = ModelRequest(system="", messages=[], tools=[], model="m")
    with pytest.raises(ModelUnavailable) as failure:
        router.complete(request, [profile("first"), profile("second"), profile("third")])
    assert now[0] <= 100
    assert seen_timeouts[0] == ("first", 60) and all(t <= 60 for _, t in seen_timeouts)
    assert seen_timeouts[1][1] == 100 - 60 - 0.25  # capped at what was left after one attempt and one wait
    assert failure.value.attempts[-1]["kind"] == "time_up" and failure.value.attempts[-1]["profile"] == "third"
