"""Model calls as runs and admins make them: a profile's chain, through the router and breaker."""

from django.conf import settings
from django.utils import timezone

from agents.backends import get_backend
from agents.backends.base import ModelOutputInvalid, ModelRequest, ModelResponse, ModelUnavailable
from agents.breaker import DatabaseBreaker, breaker_state
from agents.models import ModelProfile, ModelProfileHealth
from agents.routing import Router, RetryPolicy
from core import telemetry


STEP_MARGIN_SECONDS = 20  # what a step needs besides its model call (tools, checkpoint)
MIN_CHAIN_SECONDS = 10


def profile_chain(profile: dict) -> list[dict]:
    """The requested profile (as the agent version froze it), then its fallbacks as they are now.

    A fallback deleted since is skipped; fallbacks of fallbacks are not followed (the order an
    admin wrote is the order tried).
    """
    names = [n for n in profile.get("fallbacks") or [] if n != profile["name"]]
    if not names:
        return [profile]
    found = {p.name: p.spec() for p in ModelProfile.objects.filter(name__in=names)}
    return [profile] + [found[name] for name in names if name in found]


def router(*, breaker=None) -> Router:
    warrant = settings.WARRANT
    policy = RetryPolicy(base_seconds=warrant["MODEL_RETRY_BASE_SECONDS"], max_seconds=warrant["MODEL_RETRY_MAX_SECONDS"],
                         budget_seconds=warrant["MODEL_RETRY_BUDGET_SECONDS"])
    # The chain ends well inside the task's soft time limit, so that its attempts are recorded and
    # its last fallback (often `scripted`) still gets its turn.
    total = max(MIN_CHAIN_SECONDS, settings.CELERY_TASK_SOFT_TIME_LIMIT - STEP_MARGIN_SECONDS)
    return Router(make_backend=get_backend, breaker=breaker or DatabaseBreaker(), policy=policy, total_seconds=total)


def model_complete(request: ModelRequest, *, chain: list[dict], breaker: DatabaseBreaker | None = None) -> ModelResponse:
    """What a run's Deps.complete is: the first answer from the chain, with every attempt on it.
    `breaker`: one kept across the calls of a time slice (agents.breaker), else a new one."""
    # Tracing (core.telemetry): one `chat` span per call, its attempts and fallbacks as span events.
    with telemetry.chat_span(request, chain) as span:
        try:
            response = router(breaker=breaker).complete(request, chain)
        except (ModelUnavailable, ModelOutputInvalid) as exc:
            span.failed(exc)
            raise
        span.response(response)
        return response


class _ProbeBreaker(DatabaseBreaker):
    """An admin's test calls the server even when the breaker is open, and records what it found."""

    def allow(self, profile: str) -> bool:
        return True


PROBE = ModelRequest(system="You are a connectivity check. Answer in one word.",
                     messages=[{"role": "user", "content": "Reply with the single word: ok"}], tools=[], model="")


def model_profile_test(*, profile: ModelProfile) -> dict:
    """Call one profile once (no retries, no fallbacks) and say how it went. A success closes its breaker."""
    spec = profile.spec() | {"max_retries": 0}
    result = {"profile": profile.name, "backend": profile.backend, "model": profile.model, "ok": False,
              "latency_ms": None, "reply": "", "error": ""}
    try:
        response = router(breaker=_ProbeBreaker()).complete(PROBE, [spec])
    except ModelUnavailable as exc:
        attempt = exc.attempts[-1] if exc.attempts else {}
        result |= {"error": attempt.get("error") or str(exc), "latency_ms": attempt.get("latency_ms")}
    except ModelOutputInvalid as exc:
        result |= {"error": f"the server answered, but the reply is unusable: {exc.problem}",
                   "latency_ms": exc.attempts[-1]["latency_ms"] if exc.attempts else None}
    else:
        result |= {"ok": True, "latency_ms": response.attempts[-1]["latency_ms"], "model": response.model,
                   "reply": response.text[:200]}
    health = ModelProfileHealth.objects.filter(profile_name=profile.name).first()
    result["breaker"] = breaker_state(health, timezone.now())
    return result
