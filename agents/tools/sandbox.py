"""How a stdio tool server is started: through agents/tools/sandbox_exec.py, confined.

The server gets an empty environment plus PATH, HOME (its own working directory, a fresh temporary
directory removed when its session ends) and the variables its source passes through (only names
WARRANT_SECRET_ENV_ALLOWED allows, never the platform's own); CPU, memory and lifetime limits; and,
in the strongest form available here:

- "bubblewrap": new mount, PID, IPC, UTS and network namespaces (the network kept only for the
  programs in WARRANT_MCP_STDIO_NETWORK), a file system of the system's directories, Python's and
  WARRANT_MCP_STDIO_PATHS, read-only: no project directory, no database file; as root, the server
  runs as nobody;
- "unprivileged-user": no bubblewrap, started as root: the server runs as nobody (it sees the file
  system as nobody does, and the network);
- "limits-only": no bubblewrap, not root: the worker's own user, with the limits and environment.
"""

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

from django.conf import settings
from mcp.client.stdio import StdioServerParameters, stdio_client

from agents.services import platform_secret, secret_env_allowed

LAUNCHER = str(Path(__file__).with_name("sandbox_exec.py"))
NOBODY = 65534


class SandboxUnavailable(Exception):
    """The deployment requires bubblewrap and it cannot run here."""


@functools.lru_cache(maxsize=1)
def _bwrap_works() -> str:
    """bubblewrap's path when it can confine a process here (it needs namespaces the host may forbid)."""
    path = shutil.which("bwrap") or ""
    if not path:
        return ""
    with tempfile.TemporaryDirectory(prefix="warrant-probe-") as workdir:
        if os.geteuid() == 0:
            os.chown(workdir, NOBODY, NOBODY)
        try:
            done = subprocess.run([sys.executable, "-I", LAUNCHER, "--cwd", workdir, "--bwrap", path, "--", "/bin/true"],
                                  env={}, capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return path if done.returncode == 0 else ""


def isolation() -> dict:
    """Which isolation stdio tool servers get in this process (for /readyz and docs/tool-sources.md)."""
    wanted = settings.WARRANT.get("MCP_STDIO_SANDBOX", "auto")
    bwrap = _bwrap_works() if wanted in ("auto", "bwrap") else ""
    if bwrap:
        mode = "bubblewrap"
    elif wanted == "bwrap":
        mode = "unavailable"
    else:
        mode = "unprivileged-user" if os.geteuid() == 0 else "limits-only"
    return {"mode": mode, "environment": "empty plus passthrough", "working_directory": "fresh temporary directory",
            "cpu_seconds": settings.WARRANT["MCP_STDIO_CPU_SECONDS"], "memory_mb": settings.WARRANT["MCP_STDIO_MEMORY_MB"],
            "max_seconds": settings.WARRANT["MCP_STDIO_MAX_SECONDS"],
            "user": "nobody" if os.geteuid() == 0 and mode != "limits-only" else "the worker's",
            "network": "unshared unless listed" if mode == "bubblewrap" else "shared"}


def passed_through(source) -> dict[str, str]:
    """The variables the server may see: named by its source, allowed now, never the platform's own."""
    return {name: os.environ[name] for name in source.env_passthrough or []
            if name in os.environ and not platform_secret(name) and secret_env_allowed(name)}


def _launch(source, workdir: str) -> StdioServerParameters:
    program, *args = source.command
    resolved = shutil.which(program)  # as the worker's PATH finds it; the server itself gets a minimal PATH
    if not resolved:
        raise FileNotFoundError(f"the program {program!r} is not found on this worker's PATH")
    warrant = settings.WARRANT
    mode = isolation()["mode"]
    if mode == "unavailable":
        raise SandboxUnavailable("WARRANT_MCP_STDIO_SANDBOX=bwrap, and bubblewrap cannot run here")
    env = passed_through(source)
    launcher = [LAUNCHER, "--cwd", workdir, "--cpu", str(warrant["MCP_STDIO_CPU_SECONDS"]),
                "--memory-mb", str(warrant["MCP_STDIO_MEMORY_MB"]), "--wall", str(warrant["MCP_STDIO_MAX_SECONDS"])]
    for name in env:
        launcher += ["--keep", name]
    if mode == "bubblewrap":
        launcher += ["--bwrap", _bwrap_works(), "--ro", os.path.realpath(resolved)]
        for path in warrant.get("MCP_STDIO_PATHS") or ():
            launcher += ["--ro", path]
        if program in (warrant.get("MCP_STDIO_NETWORK") or ()):
            launcher.append("--net")
    # The SDK adds its own basic variables (PATH, HOME ...) to what it is given; the launcher starts
    # the server with none of them, so only `env` reaches it.
    return StdioServerParameters(command=sys.executable, args=["-I", *launcher, "--", resolved, *args], env=env,
                                 cwd=workdir)


@asynccontextmanager
async def stdio_transport(source, errlog):
    """The SDK's stdio transport for `source`'s server, started confined, in a directory of its own."""
    workdir = tempfile.mkdtemp(prefix="warrant-mcp-")
    try:
        if os.geteuid() == 0:
            os.chown(workdir, NOBODY, NOBODY)
        async with stdio_client(_launch(source, workdir), errlog=errlog) as streams:
            yield streams
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
