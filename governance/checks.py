"""System checks with stable ids: configuration that would make runs misbehave.

The checks of runs' own configuration (receipt signing, the witness) are in runs.checks.
"""

from django.conf import settings
from django.core import checks

from agents import append_only as agents_append_only
from core import stamp

# (the module declaring a trigger set, the migration that made it): W036 checks each made set is
# still there. Apps whose migrations make triggers add theirs (runs.apps adds the append-only set);
# agents' is listed here, since agents imports no app above it and governance sits above agents.
TRIGGERS_MADE_BY: list[tuple[object, tuple[str, str]]] = [
    (stamp, ("governance", "0006_governance_stamp_triggers")),
    (agents_append_only, ("agents", "0010_trust_change_append_only")),
]


@checks.register(checks.Tags.compatibility)
def lease_outlives_a_task(app_configs, **kwargs):
    """A lease must survive a late heartbeat: the worker renews it every heartbeat while a step runs
    (runs.lease), so how long a step takes no longer matters."""
    lease = settings.WARRANT["LEASE_SECONDS"]
    beat = settings.WARRANT.get("HEARTBEAT_SECONDS") or lease / 3
    if settings.CELERY_TASK_ALWAYS_EAGER or lease >= 2 * beat:
        return []
    return [checks.Warning(
        f"WARRANT_LEASE_SECONDS ({lease}) is less than two heartbeats (WARRANT_HEARTBEAT_SECONDS, {beat})",
        hint="A worker renews its run's lease every heartbeat while a step runs (runs.lease); a lease shorter "
             "than two of them lapses at the first late renewal, and another worker takes over a live run (its "
             "work is discarded and counts as a failed delivery). Keep the lease at three heartbeats or more.",
        id="governance.W001",
    )]


@checks.register(checks.Tags.security, deploy=True)
def model_hosts_are_listed(app_configs, **kwargs):
    if settings.WARRANT.get("MODEL_ALLOWED_HOSTS"):
        return []
    return [checks.Warning(
        "WARRANT_MODEL_ALLOWED_HOSTS is empty: model profiles may reach any public host",
        hint="List the hosts of your model servers (comma-separated), so that a profile edited through the API "
             "or the admin cannot make the workers call anywhere else.",
        id="governance.W002",
    )]


@checks.register(checks.Tags.security, deploy=True)
def tool_hosts_are_listed(app_configs, **kwargs):
    if settings.WARRANT.get("TOOL_ALLOWED_HOSTS"):
        return []
    return [checks.Warning(
        "WARRANT_TOOL_ALLOWED_HOSTS is empty: MCP-over-HTTP and OpenAPI tool sources may reach any public host",
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


@checks.register(checks.Tags.security, deploy=True)
def tokens_expire(app_configs, **kwargs):
    if settings.WARRANT["TOKEN_TTL_DAYS"] > 0:
        return []
    return [checks.Warning(
        "API tokens never expire (WARRANT_TOKEN_TTL_DAYS=0): a key copied once stays good until someone revokes it",
        hint="Set WARRANT_TOKEN_TTL_DAYS to the days a key may live (the default is 90).",
        id="governance.W020",
    )]


# Allow-lists that let a governance admin's data run code or reach anything (agents/tools/allowed.py,
# core/egress.py). Empty program, module and variable lists allow nothing; these are the
# entries that allow too much.
OPEN_PROGRAMS = ("sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "env", "python", "python3", "node", "deno",
                 "bun", "npx", "uvx", "pipx", "perl", "ruby", "php", "lua", "docker", "podman", "sudo", "su", "nohup")


@checks.register(checks.Tags.security, deploy=True)
def tool_allow_lists_are_narrow(app_configs, **kwargs):
    import os
    import re
    import sys

    warrant, found = settings.WARRANT, []
    wide = [p for p in warrant.get("MCP_STDIO_COMMANDS") or ()
            if re.sub(r"[0-9.]+$", "", os.path.basename(p)) in OPEN_PROGRAMS]
    if wide:
        found.append(checks.Warning(
            f"WARRANT_MCP_STDIO_COMMANDS allows {', '.join(wide)}: a shell, interpreter or package runner runs "
            "whatever its arguments say", id="governance.W030",
            hint="List the MCP servers' own programs (mcp-server-time), not what can start any program."))
    top = {"", *sys.stdlib_module_names, "django", "agents", "governance", "runs", "skills", "rest_framework"}
    wide = [p for p in warrant.get("PYTHON_TOOL_MODULES") or () if p.strip(".") in top]
    if wide:
        found.append(checks.Warning(
            f"WARRANT_PYTHON_TOOL_MODULES allows {', '.join(wide)}: the standard library or the platform itself",
            id="governance.W031", hint="List the packages that hold your tool functions (mycompany.tools)."))
    if any(entry.strip() in ("*", "") for entry in warrant.get("SECRET_ENV_ALLOWED") or ()):
        found.append(checks.Warning(
            "WARRANT_SECRET_ENV_ALLOWED allows every variable: profiles and tool sources may send any of the "
            "environment's values to their servers", id="governance.W032",
            hint="List the key variables meant for model and tool servers (OPENAI_API_KEY, VLLM_*)."))
    if any(entry.strip().endswith("/0") for entry in warrant.get("EGRESS_PRIVATE_NETWORKS") or ()):
        found.append(checks.Warning(
            "WARRANT_EGRESS_PRIVATE_NETWORKS allows every address: admin-supplied URLs may reach loopback, private "
            "and link-local services", id="governance.W033", hint="List only the networks your model or tool servers are in."))
    return found


@checks.register(checks.Tags.security, deploy=True)
def stdio_servers_are_confined(app_configs, **kwargs):
    from agents.tools.sandbox import isolation

    mode = isolation()["mode"]
    if mode == "bubblewrap":
        return []
    return [checks.Warning(
        f"Stdio tool servers run without bubblewrap here ({mode}): they see the network and the file system as "
        "their user does", id="governance.W034",
        hint="Install bubblewrap (make sandbox-deps; Debian's bubblewrap) where user namespaces work, or set "
             "WARRANT_MCP_STDIO_SANDBOX=bwrap to refuse to start them without it.")]


@checks.register(checks.Tags.database)
def stored_sources_are_allowed(app_configs, databases=None, **kwargs):
    """Rows saved before the rules (or a narrower list) that the rules now refuse at every call."""
    if not databases:
        return []
    from agents.isolation_rows import refused_rows

    try:
        rows = refused_rows()
    except Exception:  # noqa: BLE001 - no tables yet (before migrate): nothing stored to flag
        return []
    return [checks.Warning(f"{what} is refused at every call: {why}", id="governance.W035",
                           hint="Edit it to a registered backend, an allowed program, module or variable, or delete it.")
            for what, why in rows]


@checks.register(checks.Tags.database)
def triggers_are_in_place(app_configs, databases=None, **kwargs):
    """The triggers a migration made and a later one may have lost (core.triggers): SQLite drops a
    table's triggers when a migration rebuilds the table."""
    if not databases:
        return []
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    found = []
    for alias in databases:
        connection = connections[alias]
        applied = MigrationRecorder(connection).applied_migrations()
        for module, migration in TRIGGERS_MADE_BY:
            if migration in applied and (missing := module.TRIGGERS.missing(connection)):
                found.append(checks.Warning(
                    f"{len(missing)} trigger(s) of {module.__name__} are missing or disabled in database {alias!r}: "
                    f"{', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}", id="governance.W036",
                    hint=f"A migration rebuilt the table and dropped them. Add a migration that runs "
                         f"migrations.RunPython({module.__name__}.create_triggers, migrations.RunPython.noop)."))
    return found
