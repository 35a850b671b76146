"""Liveness and readiness, for load balancers and orchestrators. No authentication."""

from django.conf import settings
from django.db import connection
from django.http import JsonResponse


def healthz(request):
    return JsonResponse({"status": "ok"})


def readyz(request):
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # readiness reports the failure instead of raising it
        checks["database"] = {"ok": False, "error": type(exc).__name__}
    checks["broker"] = _broker()
    checks["signing_key"] = _signing_key()
    ready = all(c["ok"] for c in checks.values())
    return JsonResponse({"ready": ready, "checks": checks, "models": _models(checks["database"]["ok"]),
                         "unstaffed_approver_roles": _unstaffed(checks["database"]["ok"]),
                         "unsound_policies": _unsound_policies(checks["database"]["ok"]),
                         "witness": _witness(checks["database"]["ok"]),
                         "tool_isolation": _tool_isolation()},
                        status=200 if ready else 503)


def _tool_isolation() -> dict:
    """How stdio tool servers are confined in this process (agents/tools/sandbox.py). Informational:
    a deployment that requires bubblewrap refuses to start them without it."""
    from agents.tools.sandbox import isolation

    try:
        return isolation()
    except Exception as exc:  # readiness reports the failure instead of raising it
        return {"mode": "unknown", "error": type(exc).__name__}


def _signing_key() -> dict:
    """No key, no receipt: a run could not be sealed, so the process is not ready."""
    from runs import signing

    try:
        return {"ok": True, "key_id": signing.signing_key()[0]}
    except Exception as exc:  # readiness reports the failure instead of raising it
        return {"ok": False, "error": type(exc).__name__}


def _witness(database_ok: bool) -> dict | None:
    """Whether each witness sink has the chain's head, and how far behind it is. Informational: a
    witness that is down does not stop runs (they are caught up later), so it does not make the
    process unready. A read only: the reconciler (beat, or the embedded ticker) catches sinks up."""
    if not database_ok:
        return None
    from runs import witness

    try:
        return witness.witness_status()
    except Exception as exc:  # readiness reports the failure instead of raising it
        return {"ok": False, "error": type(exc).__name__}


def _listed(database_ok: bool, reader) -> list[dict] | None:
    """An informational list for readiness: None when the database is down or the read fails."""
    if not database_ok:
        return None
    try:
        return reader()
    except Exception:  # readiness reports the failure instead of raising it
        return None


def _unsound_policies(database_ok: bool) -> list[dict] | None:
    """Enabled policies the engine cannot evaluate (a stored regex RE2 cannot run, say).
    Informational: runs they apply to fail closed, the rest go on."""
    from governance.evaluation import unsound_policies

    return _listed(database_ok, unsound_policies)


def _unstaffed(database_ok: bool) -> list[dict] | None:
    """What names an approver role nobody is in (governance.roles). Informational, like the
    models: the process can serve, but requests parked for such a role wait unseen."""
    from governance.roles import unstaffed_approver_roles

    return _listed(database_ok, unstaffed_approver_roles)


def _models(database_ok: bool) -> list[dict] | None:
    """Each model profile's health (breaker state, last success, last error). Informational: a model
    server that is down does not make this process unready, since runs fall back or fail honestly."""
    from agents.breaker import profile_health

    return _listed(database_ok, profile_health)


def _broker() -> dict:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"ok": True, "mode": "embedded"}
    from warrant.celery import app

    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=2)
        return {"ok": True, "mode": "external"}
    except Exception as exc:  # readiness reports the failure instead of raising it
        return {"ok": False, "mode": "external", "error": type(exc).__name__}
