"""Issue 24, findings 1, 7 and 9: nothing from the API or the admin runs a program, imports a module or
reaches an address the platform engineer did not allow, and a stdio tool server cannot reach the
platform's secrets. Each test failed on the code before the fix (noted where it is not obvious)."""

import json
import os
import socket
import sys
import tempfile
import textwrap
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from agents import sources
from agents.model_calls import model_profile_test
from agents.models import ModelProfile, Tool, ToolSource
from agents.services import tool_update
from agents.tools import mcp_pool, sandbox
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from core import egress
from tests import loopback

CTX = ToolContext(run_id="test", caller="operator")
ROOT = Path(__file__).resolve().parents[2]


def _lists(settings, **changes):
    settings.WARRANT = settings.WARRANT | changes


# --- finding 1: programs and modules from allow-lists only; an empty list allows none ---------------

def test_a_shell_command_is_refused_with_an_empty_allow_list_before_anything_runs(admin, settings, tmp_path):
    _lists(settings, MCP_STDIO_COMMANDS=[])
    marker = tmp_path / "ran"
    command = ["sh", "-c", f"id > {marker}; cat /proc/$PPID/environ >> {marker}"]
    response = admin.post("/api/v1/tool-sources/", {"name": "pwn", "kind": "mcp_stdio", "command": command},
                          format="json")
    assert response.status_code == 400  # was 201, and the sync then ran it
    assert "WARRANT_MCP_STDIO_COMMANDS" in response.json()["error"]["details"]["command"][0]
    # A row stored before the rule (or by a DBA): its sync and its tools' calls start nothing either.
    source = ToolSource.objects.create(name="pwn", kind="mcp_stdio", command=command)
    report = sources.tool_source_sync(source=source)
    assert (report["ok"], report["error"]["code"]) == (False, "source_not_allowed")
    tool = Tool.objects.create(name="pwn__x", description="x", input_schema={"type": "object"}, source="mcp",
                               tool_source=source, remote_name="x", enabled=True, approved_sha256="0")
    envelope = dispatch(tool=tool.spec() | {"timeout_seconds": 5}, arguments={}, ctx=CTX)
    assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable")
    assert "WARRANT_MCP_STDIO_COMMANDS" in envelope["error"]
    assert not marker.exists()


def _marker_module(tmp_path, monkeypatch, name: str) -> Path:
    """A module on sys.path that leaves a file behind when it is imported."""
    marker = tmp_path / f"{name}-imported"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        open({str(marker)!r}, "w").write("imported")
        __all__ = ["hello"]
        def hello(name: str) -> str:
            return name
        class Backend:
            def __init__(self, profile): pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


def test_a_python_module_outside_the_list_is_never_imported(admin, settings, tmp_path, monkeypatch):
    marker = _marker_module(tmp_path, monkeypatch, "warrant_marker_tools")
    _lists(settings, PYTHON_TOOL_MODULES=[])
    response = admin.post("/api/v1/tool-sources/", {"name": "py", "kind": "python", "path": "warrant_marker_tools"},
                          format="json")
    assert response.status_code == 400  # was 201: an empty list allowed any module
    assert "WARRANT_PYTHON_TOOL_MODULES" in response.json()["error"]["details"]["path"][0]
    source = ToolSource.objects.create(name="py", kind="python", path="warrant_marker_tools")
    assert sources.tool_source_sync(source=source)["error"]["code"] == "source_not_allowed"
    tool = Tool.objects.create(name="py__hello", description="x", source="python", tool_source=source,
                               handler="warrant_marker_tools.hello", binding={"style": "kwargs"}, enabled=True,
                               input_schema={"type": "object", "properties": {"name": {"type": "string"}}})
    envelope = dispatch(tool=tool.spec() | {"timeout_seconds": 5}, arguments={"name": "x"}, ctx=CTX)
    assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable")
    assert not marker.exists()


# --- finding 7: model backends by registered name; a refused name imports nothing --------------------

@pytest.mark.parametrize("backend", ["warrant_marker_backend.Backend", "subprocess.Popen", "os.system"])
def test_a_dotted_path_backend_is_refused_without_importing_it(admin, tmp_path, monkeypatch, backend):
    marker = _marker_module(tmp_path, monkeypatch, "warrant_marker_backend")
    sys.modules.pop("warrant_marker_backend", None)
    response = admin.post("/api/v1/model-profiles/", {"name": "dotted", "backend": backend, "model": "m"},
                          format="json")
    assert response.status_code == 400  # subprocess.Popen was accepted; a refused path was still imported
    assert "registered" in response.json()["error"]["details"]["backend"][0]
    assert not marker.exists() and "warrant_marker_backend" not in sys.modules


def test_a_stored_dotted_path_is_refused_at_call_time_and_flagged(demo, tmp_path, monkeypatch):
    from governance.checks import stored_sources_are_allowed

    marker = _marker_module(tmp_path, monkeypatch, "warrant_marker_backend")
    sys.modules.pop("warrant_marker_backend", None)
    profile = ModelProfile.objects.create(name="legacy", backend="warrant_marker_backend.Backend", model="m")
    result = model_profile_test(profile=profile)
    assert result["ok"] is False and "not a registered model backend" in result["error"]
    assert not marker.exists()
    flagged = stored_sources_are_allowed(None, databases=["default"])
    assert any(w.id == "governance.W035" and "model profile legacy" in w.msg for w in flagged)


# --- finding 9: loopback, private and link-local addresses refused unless listed; key variables -------

class _Sink(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        type(self).seen.append((self.path, dict(self.headers)))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                           "model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def loopback_sink():
    _Sink.seen = []
    with loopback.serving(_Sink) as server:
        yield server.server_address[1], _Sink.seen


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://169.254.169.254",
                                 "http://10.1.2.3:8080", "http://192.168.0.1", "http://0.0.0.0:{port}"])
def test_a_profile_on_a_non_public_address_is_refused_on_write(admin, settings, loopback_sink, url):
    _lists(settings, MODEL_ALLOWED_HOSTS=(), EGRESS_PRIVATE_NETWORKS=[])
    response = admin.post("/api/v1/model-profiles/", {"name": "inner", "backend": "openai", "model": "m",
                                                      "base_url": url.format(port=loopback_sink[0])}, format="json")
    assert response.status_code == 400, response.json()  # was 201, and its test reached the service
    assert "WARRANT_EGRESS_PRIVATE_NETWORKS" in response.json()["error"]["details"]["base_url"][0]


def test_a_name_that_resolves_to_loopback_is_refused_when_connecting(demo, settings, loopback_sink):
    port, seen = loopback_sink
    _lists(settings, MODEL_ALLOWED_HOSTS=(), EGRESS_PRIVATE_NETWORKS=[])
    # 2130706433 is 127.0.0.1 written as one number: no pattern on the text catches every spelling.
    profile = ModelProfile.objects.create(name="inner", backend="openai", model="m", base_url=f"http://2130706433:{port}")
    result = model_profile_test(profile=profile)
    assert result["ok"] is False and "loopback" in result["error"]
    assert seen == []  # nothing was sent (before, the profile test reported the service's answer)
    # Listed, the same server is reached: by host name on the profiles' list, or by network.
    _lists(settings, MODEL_ALLOWED_HOSTS=("2130706433",))
    assert model_profile_test(profile=profile)["ok"] is True
    _lists(settings, MODEL_ALLOWED_HOSTS=(), EGRESS_PRIVATE_NETWORKS=["127.0.0.0/8"])
    assert model_profile_test(profile=profile)["ok"] is True and len(seen) == 2


def test_every_address_a_name_resolves_to_is_checked(settings, monkeypatch):
    _lists(settings, EGRESS_PRIVATE_NETWORKS=[])
    real = socket.getaddrinfo

    def public_and_loopback(host, port, *args, **kwargs):  # what a hostile DNS server answers for its name
        if host == "rebind.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                    (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", public_and_loopback)
    with pytest.raises(egress.EgressRefused, match="loopback"):
        egress.egress_check("http://rebind.example/")
    with egress.client(timeout=2) as client, pytest.raises(egress.EgressRefused):
        client.get("http://rebind.example/")  # checked in the connection layer, on what is connected to


def test_tool_sources_do_not_reach_loopback_unless_listed(admin, settings, loopback_sink, live_server):
    port, seen = loopback_sink
    _lists(settings, TOOL_ALLOWED_HOSTS=(), EGRESS_PRIVATE_NETWORKS=[])
    for kind in ("openapi", "mcp_http"):
        response = admin.post("/api/v1/tool-sources/", {"name": kind.replace("_", "-"), "kind": kind,
                                                        "url": f"http://127.0.0.1:{port}/doc"}, format="json")
        assert response.status_code == 400 and "url" in response.json()["error"]["details"]
        # Stored anyway (a DBA, or an older row): its sync reaches nothing.
        source = ToolSource.objects.create(name=kind.replace("_", "-"), kind=kind, url=f"http://2130706433:{port}/doc")
        report = sources.tool_source_sync(source=source)
        assert report["ok"] is False and "loopback" in report["error"]["message"]
    assert seen == []


@pytest.mark.parametrize("name", ["HOME", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "EMAIL_HOST_PASSWORD", "OPENAI_API_KEY"])
def test_a_key_variable_the_deployment_does_not_list_is_refused(admin, settings, name):
    _lists(settings, SECRET_ENV_ALLOWED=[])
    response = admin.post("/api/v1/model-profiles/", {"name": "keyed", "backend": "openai", "model": "m",
                                                      "base_url": "https://api.example.com", "api_key_env": name},
                          format="json")
    assert response.status_code == 400  # each was accepted, and its value sent to the profile's server
    assert "api_key_env" in response.json()["error"]["details"]
    _lists(settings, SECRET_ENV_ALLOWED=["OPENAI_*"])
    response = admin.post("/api/v1/model-profiles/", {"name": "keyed", "backend": "openai", "model": "m",
                                                      "base_url": "https://api.example.com", "api_key_env": name},
                          format="json")
    assert response.status_code == (201 if name == "OPENAI_API_KEY" else 400)


def test_a_stored_key_variable_no_longer_listed_is_never_sent(demo, settings, loopback_sink, monkeypatch):
    port, seen = loopback_sink
    monkeypatch.setenv("HOME_CANARY_KEY", "canary-value-7f3a")
    _lists(settings, SECRET_ENV_ALLOWED=[])
    profile = ModelProfile.objects.create(name="keyed", backend="openai", model="m", base_url=f"http://127.0.0.1:{port}",
                                          api_key_env="HOME_CANARY_KEY")
    result = model_profile_test(profile=profile)
    assert result["ok"] is False and "WARRANT_SECRET_ENV_ALLOWED" in result["error"]
    assert seen == []


# --- stdio servers: no secrets, no database, no network (under bubblewrap) ----------------------------

PROBE_SERVER = '''
import json, os, resource, socket, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def probe(paths: list[str], port: int) -> str:
    """Say what this process can see."""
    readable = {}
    for path in paths:
        try:
            with open(path, "rb") as handle:
                readable[path] = handle.read(64).decode("latin-1")
        except OSError as exc:
            readable[path] = "refused: " + type(exc).__name__
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        network = "connected"
    except OSError as exc:
        network = "refused: " + type(exc).__name__
    return json.dumps({"env": dict(os.environ), "readable": readable, "network": network, "uid": os.geteuid(),
                       "cwd": os.getcwd(), "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
                       "memory": resource.getrlimit(resource.RLIMIT_AS)[0]})


server.run()
'''


@pytest.mark.slow  # starts a stdio server process
def test_a_stdio_server_sees_no_secret_no_database_and_no_network(demo, settings, tmp_path, monkeypatch):
    tmp_path.chmod(0o755)  # the server's user (nobody, as root) reads its script
    script = tmp_path / "probe_server.py"
    script.write_text(PROBE_SERVER)
    database = Path(django_settings.DATA_DIR) / "warrant.sqlite3"
    if not database.exists():
        pytest.skip(f"no database file at {database} to try to read")
    monkeypatch.setenv("CANARY_PLATFORM_SECRET", "canary-4d1e9b")
    monkeypatch.setenv("PASSED_THROUGH", "meant-for-the-server")
    _lists(settings, MCP_STDIO_COMMANDS=[sys.executable], MCP_STDIO_PATHS=[str(tmp_path)],
           SECRET_ENV_ALLOWED=["PASSED_THROUGH"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    source = sources.tool_source_create(values={"name": "probe", "kind": "mcp_stdio",
                                                "command": [sys.executable, str(script)],
                                                "env_passthrough": ["PASSED_THROUGH"]})
    assert sources.tool_source_sync(source=source)["ok"] is True
    tool = tool_update(tool=Tool.objects.get(name="probe__probe"), values={"enabled": True})
    envelope = dispatch(tool=tool.spec() | {"timeout_seconds": 30},
                        arguments={"paths": [str(database), str(ROOT / "manage.py"), f"/proc/{os.getpid()}/environ"],
                                   "port": listener.getsockname()[1]}, ctx=CTX)
    assert envelope["ok"], envelope
    data = envelope["data"]
    seen = json.loads(data["result"] if isinstance(data, dict) else data)
    mode = sandbox.isolation()["mode"]

    assert "canary-4d1e9b" not in json.dumps(seen)  # neither in its environment nor read from the parent's
    assert set(seen["env"]) <= {"PATH", "HOME", "LANG", "PWD", "PASSED_THROUGH"}
    assert seen["env"]["PASSED_THROUGH"] == "meant-for-the-server"
    assert seen["readable"][f"/proc/{os.getpid()}/environ"].startswith("refused")
    assert seen["cwd"] != os.getcwd() and seen["cwd"].startswith(tempfile.gettempdir())  # a directory of its own
    mcp_pool.pool().close_all()
    assert not Path(seen["cwd"]).exists()  # removed with its server
    assert seen["cpu"] == settings.WARRANT["MCP_STDIO_CPU_SECONDS"]
    assert seen["memory"] == settings.WARRANT["MCP_STDIO_MEMORY_MB"] * 1024 * 1024
    if os.geteuid() == 0:
        assert seen["uid"] == 65534
    if mode == "bubblewrap":
        assert seen["readable"][str(database)].startswith("refused")  # not in its file system at all
        assert seen["readable"][str(ROOT / "manage.py")].startswith("refused")
        assert seen["network"].startswith("refused")
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing reached the test's port
    else:
        # Without bubblewrap the server is only another user: it reads what that user may read (a
        # database file left world-readable included) and has the network. Said in docs/tool-sources.md and /readyz.
        pytest.skip(f"isolation here is {mode}: the file-system and network assertions need bubblewrap")
    listener.close()


def test_readyz_says_which_isolation_is_in_force(client):
    body = client.get("/readyz").json()
    assert body["tool_isolation"]["mode"] == sandbox.isolation()["mode"]
    assert body["tool_isolation"]["mode"] in ("bubblewrap", "unprivileged-user", "limits-only", "unavailable")
