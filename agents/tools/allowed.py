"""What the platform engineer allows tool sources to start, import and reach, read from settings.

Checked when a source is saved, at every sync and at every call: a list narrowed after a source was
saved stops it at once. An empty list of programs or modules allows none (starting a program or
importing a module runs code on the server).
"""

import re

from django.conf import settings

DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


class NotAllowed(Exception):
    """The source as stored breaks the deployment's rules now; nothing was started or imported."""


def command_allowed(program: str) -> bool:
    """Whether WARRANT_MCP_STDIO_COMMANDS names this program, exactly as the source gives it."""
    return isinstance(program, str) and program in (settings.WARRANT.get("MCP_STDIO_COMMANDS") or ())


def python_path_allowed(path: str) -> bool:
    """Whether a dotted path lies within one of WARRANT_PYTHON_TOOL_MODULES's prefixes."""
    if not isinstance(path, str) or not DOTTED.match(path):
        return False
    return any(path == prefix.rstrip(".") or path.startswith(prefix.rstrip(".") + ".")
               for prefix in settings.WARRANT.get("PYTHON_TOOL_MODULES") or () if prefix.strip("."))


def tool_egress_rule() -> dict:
    """The arguments core.egress takes for tool sources (mcp_http, openapi)."""
    return {"allowed_hosts": settings.WARRANT.get("TOOL_ALLOWED_HOSTS") or (), "setting": "WARRANT_TOOL_ALLOWED_HOSTS"}
