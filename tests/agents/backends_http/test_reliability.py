"""Retries, Retry-After, backoff, the shared circuit breaker and fallbacks, against real servers."""

import email.utils
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.backends import get_backend
from agents.backends.base import ModelRequest, ModelUnavailable
from agents.breaker import DatabaseBreaker
from agents.models import ModelProfileHealth
from agents.routing import Router, RetryPolicy
from tests.agents.backends_http.server import Reply, profile_spec
from tests.agents.backends_http.wire import openai_reply

pytestmark = pytest.mark.django_db

REQUEST = ModelRequest(system="Be brief.", messages=[{"role": "user", "content": "List all accounts."}], tools=[],
                       model="")
SCRIPTED = {"name": "scripted", "backend": "scripted", "model": "scripted-1", "max_retries": 0, "fallbacks": []}


class Waits(list):
    """The router's sleep: records how long it was asked to wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _router(waits=None, *, budget=60.0, failures=3):
    return Router(make_backend=get_backend, breaker=DatabaseBreaker(failures=failures, cooldown_seconds=60),
                  policy=RetryPolicy(base_seconds=0.5, max_seconds=8, budget_seconds=budget),
                  sleep=waits if waits is not None else Waits())


def test_a_429_is_retried_after_the_seconds_retry_after_names(model_server):
    model_server.script(Reply(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "3"}),
                        Reply(json=openai_reply("Four accounts.")))
    waits = Waits()
    response = _router(waits).complete(REQUEST, [profile_spec(model_server)])
    assert response.text == "Four accounts." and len(model_server.requests) == 2
    assert waits[0] >= 3
    first, second = response.attempts
    assert (first["outcome"], first["kind"], first["status"], first["retry_after_s"]) == ("failed", "rate_limited", 429, 3)
    assert first["wait_ms"] >= 3000 and second["outcome"] == "ok"


def test_a_503_with_an_http_date_retry_after_waits_until_that_date(model_server):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    model_server.script(Reply(503, {"error": {"message": "loading model"}}, headers={"Retry-After": when}),
                        Reply(json=openai_reply("ok")))
    waits = Waits()
    _router(waits).complete(REQUEST, [profile_spec(model_server)])
    assert 28 <= waits[0] <= 31


def test_5xx_is_retried_with_growing_jittered_backoff_then_the_fallback_answers(model_server):
    model_server.default = lambda seen: Reply(500, {"error": {"message": "boom"}})
    waits = Waits()
    response = _router(waits, failures=10).complete(REQUEST, [profile_spec(model_server, max_retries=3), SCRIPTED])
    assert len(model_server.requests) == 4
    assert [0.25 <= waits[0] <= 0.5, 0.5 <= waits[1] <= 1, 1 <= waits[2] <= 2] == [True, True, True], waits
    assert response.profile == "scripted" and response.backend == "scripted"
    assert [(a["profile"], a["outcome"]) for a in response.attempts] == [("openai-test", "failed")] * 4 + [
        ("scripted", "ok")]


def test_a_4xx_other_than_429_is_not_retried(model_server):
    model_server.script(Reply(400, {"error": {"message": "bad request"}}))
    response = _router().complete(REQUEST, [profile_spec(model_server, max_retries=5), SCRIPTED])
    assert len(model_server.requests) == 1 and response.profile == "scripted"
    assert response.attempts[0]["kind"] == "client_error" and "wait_ms" not in response.attempts[0]


def test_a_garbled_reply_is_asked_again_once_only(model_server):
    model_server.default = lambda seen: Reply(body=b"{not json")
    response = _router().complete(REQUEST, [profile_spec(model_server, max_retries=5), SCRIPTED])
    assert len(model_server.requests) == 2
    assert [a["kind"] for a in response.attempts[:2]] == ["bad_reply", "bad_reply"]


def test_a_retry_after_past_the_budget_goes_to_the_fallback_without_waiting(model_server):
    model_server.script(Reply(429, {}, headers={"Retry-After": "120"}))
    waits = Waits()
    response = _router(waits, budget=10).complete(REQUEST, [profile_spec(model_server, max_retries=5), SCRIPTED])
    assert waits == [] and len(model_server.requests) == 1 and response.profile == "scripted"
    assert "retry budget" in response.attempts[0]["gave_up"]


def test_a_hanging_server_times_out_and_the_fallback_answers(model_server):
    model_server.default = lambda seen: Reply(json=openai_reply("too late"), delay=2)
    response = _router().complete(REQUEST, [profile_spec(model_server, read_timeout=0.2, max_retries=1), SCRIPTED])
    assert [a["kind"] for a in response.attempts[:2]] == ["timeout", "timeout"]
    assert response.profile == "scripted"


def test_when_every_profile_fails_the_error_carries_every_attempt(model_server):
    model_server.default = lambda seen: Reply(502, {})
    with pytest.raises(ModelUnavailable) as caught:
        _router(failures=10).complete(REQUEST, [profile_spec(model_server, max_retries=1)])
    assert [a["status"] for a in caught.value.attempts] == [502, 502]


def test_the_breaker_opens_for_every_worker_and_a_dead_server_stops_being_called(model_server):
    model_server.default = lambda seen: Reply(503, {})
    spec = profile_spec(model_server, max_retries=2)
    first = _router().complete(REQUEST, [spec, SCRIPTED])
    assert len(model_server.requests) == 3 and first.attempts[2].get("breaker_opened") is True
    health = ModelProfileHealth.objects.get(profile_name="openai-test")
    assert health.opened_until > timezone.now() and health.last_error == "HTTP 503"
    # Another worker (its own router and breaker objects, the same database) skips the server.
    second = _router().complete(REQUEST, [spec, SCRIPTED])
    assert len(model_server.requests) == 3
    assert second.attempts[0] | {"latency_ms": 0} == {
        "profile": "openai-test", "backend": "openai", "model": "test-model", "attempt": 0, "outcome": "skipped",
        "kind": "circuit_open", "error": "the circuit breaker is open: recent calls failed", "latency_ms": 0}


def test_after_the_cooldown_exactly_one_caller_probes_and_a_success_closes_the_breaker(model_server):
    ModelProfileHealth.objects.create(profile_name="openai-test", consecutive_failures=3,
                                      opened_until=timezone.now() - timedelta(seconds=1))
    one, other = DatabaseBreaker(failures=3, cooldown_seconds=60), DatabaseBreaker(failures=3, cooldown_seconds=60)
    assert [one.allow("openai-test"), other.allow("openai-test")] == [True, False]
    model_server.script(Reply(json=openai_reply("back")))
    ModelProfileHealth.objects.filter(profile_name="openai-test").update(opened_until=timezone.now() - timedelta(seconds=1))
    assert _router().complete(REQUEST, [profile_spec(model_server)]).text == "back"
    health = ModelProfileHealth.objects.get(profile_name="openai-test")
    assert health.opened_until is None and health.consecutive_failures == 0 and health.last_success_at


def test_client_errors_do_not_open_the_breaker(model_server):
    model_server.default = lambda seen: Reply(401, {"error": {"message": "bad key"}})
    for _ in range(4):
        _router().complete(REQUEST, [profile_spec(model_server), SCRIPTED])
    health = ModelProfileHealth.objects.get(profile_name="openai-test")
    assert health.opened_until is None and health.consecutive_failures == 0 and "bad key" in health.last_error
