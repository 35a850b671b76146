"""Real tool sources for the tests: MCP servers from PyPI and npm, started here on loopback."""

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from agents import sources
from agents.models import Tool
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from governance.services import grant_create
from runs.models import Run
from tests.browser.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = ROOT / "var" / "test-mcp-npm"
EVERYTHING = NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"



# Free loopback ports, so that two runs of the suite on one machine never collide.
EVERYTHING_HTTP_PORT = free_port()
# pytest-django's live_server (Warrant's own API, the OpenAPI service of these tests): loopback, a free port.
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1")
# The everything server listens on every interface; this preload pins Node's listen() to loopback.
LOOPBACK_PRELOAD = """import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\\d+$/.test(args[0]))) args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
"""


def tool_allow_lists() -> dict:
    """What these tests start, import and read, listed as a deployment would (an empty list allows nothing)."""
    return {"MCP_STDIO_COMMANDS": [sys.executable, "node", "mcp-server-time", "/nonexistent/mcp-server"],
            "PYTHON_TOOL_MODULES": ["tests.tools"],
            "MCP_STDIO_PATHS": [str(NPM_DIR)]}


@pytest.fixture(autouse=True)
def _tool_allow_lists(settings):
    settings.WARRANT = settings.WARRANT | tool_allow_lists()


@pytest.fixture(autouse=True)
def _no_mcp_session_outlives_its_test():
    """Kept MCP sessions belong to the test that opened them (their servers are child processes)."""
    yield
    from agents.tools import mcp_pool

    current = mcp_pool.existing_pool()
    if current is not None:
        current.close_all()


def time_server_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "mcp_server_time", *extra]


@pytest.fixture(scope="session")
def everything_server() -> Path:
    """@modelcontextprotocol/server-everything, installed from tests/tools/npm into var/ (once)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js (node and npm) is not installed: the npm MCP server cannot run")
    NPM_DIR.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test processes (pytest-xdist) share var/: one installs while the others wait for it.
    with open(NPM_DIR.parent / "test-mcp-npm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not EVERYTHING.exists():
            NPM_DIR.mkdir(exist_ok=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(ROOT / "tests" / "tools" / "npm" / name, NPM_DIR / name)
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=NPM_DIR,
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0 or not EVERYTHING.exists():
                pytest.skip(f"npm could not install the everything server: {done.stderr[-300:]}")
    return EVERYTHING


@pytest.fixture(scope="session")
def everything_http(everything_server, tmp_path_factory):
    """The everything server over streamable HTTP on 127.0.0.1:EVERYTHING_HTTP_PORT."""
    preload = tmp_path_factory.mktemp("node") / "loopback.mjs"
    preload.write_text(LOOPBACK_PRELOAD)
    process = subprocess.Popen(
        ["node", "--import", str(preload), str(everything_server), "streamableHttp"],
        env={**os.environ, "PORT": str(EVERYTHING_HTTP_PORT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", EVERYTHING_HTTP_PORT), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail("the everything server exited at start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{EVERYTHING_HTTP_PORT}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def child_processes() -> list[int]:
    """Live processes whose parent is this test process (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.append(int(entry))
    return found


def tool_events(run: Run) -> list[dict]:
    return [e.data for e in run.events.filter(kind="tool_call").order_by("seq")]


def shown(run: Run) -> list[str]:
    return [name for e in run.events.filter(kind="model_call").order_by("seq") for name in e.data["tools_shown"]]


CTX = ToolContext(run_id="r-1", caller="operator")


@pytest.fixture
def add(demo) -> dict:
    """py__add from a Python source, enabled, granted to operators, called once (so its row is kept):
    the spec dispatch takes."""
    source = sources.tool_source_create(values={"name": "py", "kind": "python", "path": "tests.tools.pyfuncs"})
    sources.tool_source_sync(source=source)
    Tool.objects.filter(name="py__add").update(enabled=True)
    grant_create(role=Group.objects.get(name="operators"), tool=Tool.objects.get(name="py__add"))
    tool = Tool.objects.get(name="py__add")
    spec = tool.spec() | {"handler": tool.handler, "timeout_seconds": tool.timeout_seconds}
    assert dispatch(tool=spec, arguments={"a": 1}, ctx=CTX) == {"ok": True, "data": 3}
    return spec
