"""Kept MCP sessions (agents/tools/mcp_pool.py), against the real servers of test_mcp_sources: one
server process serves many calls, and nothing about a call's safety depends on the session being new."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from agents import sources
from agents.models import Tool
from agents.tools import mcp_pool
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from governance.services import grant_create
from tests import factories
from tests.tools.conftest import child_processes, time_server_command

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # each test starts MCP server processes

CTX = ToolContext(run_id="test", caller="operator")


def _ready(name: str) -> dict:
    tool = Tool.objects.get(name=name)
    tool.enabled = True
    tool.save()
    grant_create(role=factories.role(factories.CALLER_ROLE), tool=tool)
    return tool.spec() | {"handler": tool.handler, "timeout_seconds": tool.timeout_seconds}


def _clock(*args: str):
    source = sources.tool_source_create(values={"name": "clock", "kind": "mcp_stdio", "command": time_server_command(*args)})
    sources.tool_source_sync(source=source)
    return source, _ready("clock__get_current_time")


def _now(tool: dict, zone: str = "Asia/Tokyo") -> dict:
    return dispatch(tool=tool, arguments={"timezone": zone}, ctx=CTX)


def _live_tree(root: int, known: set[int] = frozenset()) -> set[int]:
    """`root` and the processes under it that are still alive (zombies excluded); `known` pids count
    as under it even once their parent is gone (the kernel hands orphans to another parent)."""
    parents, live = {}, set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state, ppid = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:2]
            except OSError:
                continue
            parents[int(entry)] = int(ppid)
            if state != "Z":
                live.add(int(entry))
    tree, grew = {root} | set(known), True
    while grew:
        below = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree, grew = tree | below, bool(below)
    return tree & live


def test_calls_share_one_server_process(db):
    _, tool = _clock()
    before = set(child_processes())
    assert _now(tool)["data"]["timezone"] == "Asia/Tokyo"
    started = set(child_processes()) - before
    assert len(started) == 1  # the kept session's server
    for zone in ("Europe/Paris", "America/Chicago", "UTC"):
        assert _now(tool, zone)["data"]["timezone"] == zone
    assert set(child_processes()) - before == started  # the same process answered every call
    assert mcp_pool.pool().stats()["open"] == 1


def test_a_server_that_died_while_idle_is_replaced_and_the_call_still_answers(db):
    _, tool = _clock()
    before = set(child_processes())
    assert _now(tool)["ok"]
    [server] = set(child_processes()) - before
    tree = _live_tree(server)
    os.kill(server, signal.SIGKILL)
    # Under bubblewrap our child is bwrap and the server its grandchild, killed only after bwrap dies
    # (--die-with-parent): under load it could still answer the tool list of the call below, and then
    # die under the call itself, which is never retried. "Died while idle" means the whole tree is gone.
    for _ in range(600):
        if not tree & _live_tree(server, tree):
            break
        time.sleep(0.05)
    assert not tree & _live_tree(server, tree), "the killed server's processes are still running"
    envelope = _now(tool, "Europe/Paris")
    assert envelope["ok"] and envelope["data"]["timezone"] == "Europe/Paris", envelope  # the envelope says why
    [replacement] = set(child_processes()) - before
    assert replacement != server


def test_an_idle_session_is_closed_and_its_server_stops(db):
    _, tool = _clock()
    before = set(child_processes())
    assert _now(tool)["ok"]
    assert set(child_processes()) - before
    pool = mcp_pool.pool()
    assert pool.reap() == 0  # just used: kept
    assert pool.reap(now=time.monotonic() + mcp_pool.idle_seconds() + 1) == 1
    assert set(child_processes()) == before and pool.stats()["open"] == 0


def test_a_changed_source_never_reuses_the_old_server(db):
    source, tool = _clock()
    before = set(child_processes())
    assert _now(tool)["ok"]
    [old] = set(child_processes()) - before
    source.env_passthrough = ["LANG"]  # what the server is started with changed
    source.save()
    assert _now(tool)["ok"]
    [new] = set(child_processes()) - before  # the old one was stopped, not left beside it
    assert new != old


def test_with_the_pool_off_every_call_has_its_own_session(db, settings):
    settings.WARRANT = settings.WARRANT | {"MCP_SESSION_IDLE_SECONDS": 0}
    _, tool = _clock()
    current = mcp_pool.existing_pool()
    opened = current.stats()["opened"] if current else 0
    before = set(child_processes())
    assert _now(tool)["ok"] and _now(tool, "UTC")["ok"]
    assert set(child_processes()) == before  # each session ended with its call
    current = mcp_pool.existing_pool()
    assert (current.stats()["opened"] if current else 0) == opened


def test_a_call_whose_server_dies_mid_call_is_not_sent_again(db, everything_server):
    source = sources.tool_source_create(values={"name": "every", "kind": "mcp_stdio",
                                                "command": ["node", str(everything_server), "stdio"]})
    sources.tool_source_sync(source=source)
    slow = _ready("every__trigger-long-running-operation")
    echo = _ready("every__echo")
    before = set(child_processes())
    assert dispatch(tool=echo, arguments={"message": "warm"}, ctx=CTX)["ok"]  # the session is open and reused
    [server] = set(child_processes()) - before
    opened = mcp_pool.pool().stats()["opened"]
    threading.Timer(1.0, os.kill, args=(server, signal.SIGKILL)).start()
    envelope = dispatch(tool=slow, arguments={"duration": 30, "steps": 3}, ctx=CTX)
    assert envelope["ok"] is False and envelope["code"] == "tool_unavailable", envelope
    # No second session was opened to send the call again: the server may have acted on it.
    assert mcp_pool.pool().stats()["opened"] == opened
    assert dispatch(tool=echo, arguments={"message": "again"}, ctx=CTX) == {"ok": True, "data": "Echo: again"}


def test_a_kept_session_is_not_used_once_its_program_is_no_longer_allowed(db, settings):
    # Issue 24, finding 1: the rules are read at every call, before any session, kept ones included.
    _, tool = _clock()
    assert _now(tool)["ok"]
    settings.WARRANT = settings.WARRANT | {"MCP_STDIO_COMMANDS": ["mcp-server-fetch"]}
    envelope = _now(tool)
    assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable")
    assert "WARRANT_MCP_STDIO_COMMANDS" in envelope["error"]
