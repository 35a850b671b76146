"""System checks with stable ids: configuration that would make runs misbehave."""

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.compatibility)
def lease_outlives_a_task(app_configs, **kwargs):
    lease = settings.WARRANT["LEASE_SECONDS"]
    limit = settings.CELERY_TASK_TIME_LIMIT
    if settings.CELERY_TASK_ALWAYS_EAGER or lease > limit:
        return []
    return [checks.Warning(
        f"WARRANT_LEASE_SECONDS ({lease}) is not longer than the task time limit ({limit} s)",
        hint="A step still running when its lease ends can be claimed by a second worker; the loser's work is "
             "discarded and counts as a failed delivery. Make the lease longer than the hard time limit.",
        id="governance.W001",
    )]


@checks.register(checks.Tags.security, deploy=True)
def model_hosts_are_listed(app_configs, **kwargs):
    if settings.WARRANT.get("MODEL_ALLOWED_HOSTS"):
        return []
    return [checks.Warning(
        "WARRANT_MODEL_ALLOWED_HOSTS is empty: model profiles may reach any host",
        hint="List the hosts of your model servers (comma-separated), so that a profile edited through the API "
             "or the admin cannot make the workers call anywhere else.",
        id="governance.W002",
    )]


@checks.register(checks.Tags.security, deploy=True)
def tool_hosts_are_listed(app_configs, **kwargs):
    if settings.WARRANT.get("TOOL_ALLOWED_HOSTS"):
        return []
    return [checks.Warning(
        "WARRANT_TOOL_ALLOWED_HOSTS is empty: MCP-over-HTTP and OpenAPI tool sources may reach any host",
        hint="List the hosts of your tool services (comma-separated), so that a tool source registered through the "
             "API or the admin cannot make the workers call anywhere else.",
        id="governance.W003",
    )]


@checks.register(checks.Tags.security, deploy=True)
def rate_limits_are_shared(app_configs, **kwargs):
    if not settings.CACHES["default"]["BACKEND"].endswith(("LocMemCache", "DummyCache")):
        return []
    return [checks.Warning(
        "The cache is not shared (no WARRANT_CACHE_URL): each process counts the API's rate limits alone "
        "(with the dummy cache, none does)",
        hint="With several web processes (gunicorn -w 4) a client gets each limit once per process. Point "
             "WARRANT_CACHE_URL at Redis (e.g. redis://redis:6379/1) so that every process counts together.",
        id="governance.W004",
    )]


@checks.register(checks.Tags.security)
def receipts_can_be_signed(app_configs, **kwargs):
    """Without a signing key no run can be sealed: refuse to start rather than fail every run's end."""
    from runs import signing

    try:
        signing.signing_key()
    except Exception as exc:  # the key's own error says what is wrong with it
        return [checks.Error(str(exc), hint=signing.missing_key_message(), id="governance.E010")]
    if settings.WARRANT_WITNESS_URL:
        from runs.witness import witness_host_allowed

        if not witness_host_allowed(settings.WARRANT_WITNESS_URL):
            return [checks.Error("WARRANT_WITNESS_URL's host is not in WARRANT_WITNESS_ALLOWED_HOSTS",
                                 hint="List the witness's host there: checkpoints are only sent where the platform "
                                      "engineer allowed.", id="governance.E011")]
    return []


@checks.register(checks.Tags.security, deploy=True)
def tokens_expire(app_configs, **kwargs):
    if settings.WARRANT["TOKEN_TTL_DAYS"] > 0:
        return []
    return [checks.Warning(
        "API tokens never expire (WARRANT_TOKEN_TTL_DAYS=0): a key copied once stays good until someone revokes it",
        hint="Set WARRANT_TOKEN_TTL_DAYS to the days a key may live (the default is 90).",
        id="governance.W020",
    )]
