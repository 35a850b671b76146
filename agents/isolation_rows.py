"""Stored profiles and tool sources that today's rules refuse (for `check --database default` and migrate).

A row written before the rules existed (a dotted-path backend, a program or module from when an
empty list allowed any, a key variable no longer listed) is not changed: it is refused at every
call, with the reason, and named here so that an admin can fix or delete it. Reading the rows
imports nothing.
"""

from agents.backends import registered_names
from agents.models import ModelProfile, ToolSource
from agents.services import platform_secret, secret_env_allowed
from agents.tools.allowed import command_allowed, python_path_allowed


def _variable_refused(name: str) -> bool:
    return bool(name) and (platform_secret(name) or not secret_env_allowed(name))


def refused_rows() -> list[tuple[str, str]]:
    found, names = [], set(registered_names())
    for profile in ModelProfile.objects.only("name", "backend", "api_key_env"):
        if profile.backend not in names:
            found.append((f"model profile {profile.name}", f"its backend {profile.backend!r} is not a registered name"))
        if _variable_refused(profile.api_key_env):
            found.append((f"model profile {profile.name}",
                          f"its key variable {profile.api_key_env} is not in WARRANT_SECRET_ENV_ALLOWED"))
    for source in ToolSource.objects.filter(enabled=True):
        what = f"tool source {source.name}"
        if source.kind == ToolSource.Kind.MCP_STDIO and not (source.command and command_allowed(source.command[0])):
            found.append((what, f"its program {(source.command or [''])[0]!r} is not in WARRANT_MCP_STDIO_COMMANDS"))
        if source.kind == ToolSource.Kind.PYTHON and not python_path_allowed(source.path):
            found.append((what, f"its module {source.path!r} is outside WARRANT_PYTHON_TOOL_MODULES"))
        refused = [n for n in [source.auth_env, *(source.env_passthrough or [])] if _variable_refused(n)]
        if refused:
            found.append((what, f"it names variables not in WARRANT_SECRET_ENV_ALLOWED: {', '.join(refused)}"))
    return found
