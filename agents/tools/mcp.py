"""MCP servers as tool sources, through the official `mcp` SDK.

A sync (discover) runs in a session of its own: connect, list, disconnect. A call runs on a
session kept open between calls (agents/tools/mcp_pool.py: per process, per source and
configuration, closed when idle, when the source changes or when a call overruns its deadline),
or, with the pool turned off, in a session of its own. Either way one deadline covers the call,
and the server's tool list is checked against the approved fingerprint before every call.
"""

import os
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents.models import ToolSource, tool_fingerprint
from agents.services import platform_secret, secret_env_allowed, tool_host_allowed
from agents.tools import mcp_pool, sandbox
from agents.tools.allowed import command_allowed, tool_egress_rule
from agents.tools.deadline import ToolTimeout
from agents.tools.envelopes import ToolError
from core import egress

MAX_TOOLS = 500


@dataclass(frozen=True)
class RemoteTool:
    name: str
    description: str
    input_schema: dict
    read_only: bool


class ToolChanged(Exception):
    """The server now describes the tool differently from what was approved."""

    def __init__(self, current: RemoteTool | None):
        super().__init__("the tool changed at its source")
        self.current = current


class SourceUnavailable(Exception):
    """The server could not be reached or did not speak MCP."""


def credential_headers(source: ToolSource) -> dict[str, str]:
    if not source.auth_header:
        return {}
    if platform_secret(source.auth_env) or not secret_env_allowed(source.auth_env):  # a row saved before the list narrowed, or before it existed
        raise SourceUnavailable(f"the variable {source.auth_env} is not among those this deployment lets tool sources "
                                "send (WARRANT_SECRET_ENV_ALLOWED)")
    value = os.environ.get(source.auth_env, "")
    if not value:
        # Fail closed: a call without its credential would be a different, unauthenticated call.
        raise SourceUnavailable(f"the environment variable {source.auth_env or '(none)'} holding the credential is not set")
    return {source.auth_header: value}


def allowed_now(source: ToolSource) -> None:
    """Refuse a source the deployment's rules no longer allow, before any session (kept ones included):
    the lists may have narrowed since it was saved or its session opened."""
    if source.kind == ToolSource.Kind.MCP_STDIO and not (source.command and command_allowed(source.command[0])):
        raise SourceUnavailable(f"the program {(source.command or ['(none)'])[0]!r} is not among the programs this "
                                "deployment allows (WARRANT_MCP_STDIO_COMMANDS)")
    if source.kind == ToolSource.Kind.MCP_HTTP and not tool_host_allowed(source.url):
        raise SourceUnavailable("the source's host is not among the hosts this deployment allows (WARRANT_TOOL_ALLOWED_HOSTS)")


def _transport(source: ToolSource, errlog, timeout: float):
    allowed_now(source)
    if source.kind == ToolSource.Kind.MCP_STDIO:
        return sandbox.stdio_transport(source, errlog)
    return _http_transport(source.url, credential_headers(source), timeout)


@asynccontextmanager
async def _http_transport(url: str, headers: dict, timeout: float):
    # The SDK leaves a client it was given open; this one is ours to close with the session. Every
    # connection it opens is checked where it goes (core/egress.py), redirects included.
    async with egress.async_client(**tool_egress_rule(), headers=headers, timeout=httpx2.Timeout(timeout)) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


def _remote(tool) -> RemoteTool:
    hints = tool.annotations
    return RemoteTool(
        name=tool.name,
        description=(tool.description or tool.title or "").strip(),
        input_schema=dict(tool.input_schema or {"type": "object"}),
        read_only=bool(hints and hints.read_only_hint),
    )


async def _list(client: Client) -> list[RemoteTool]:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(_remote(t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None or len(tools) >= MAX_TOOLS:
            return tools[:MAX_TOOLS]


def _run(source: ToolSource, timeout: float, work):
    """Run `work(client)` in one MCP session under one deadline; the server's stderr is kept for errors."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        async def session():
            with anyio.fail_after(timeout):
                async with Client(_transport(source, errlog, timeout), read_timeout_seconds=timeout) as client:
                    return await work(client)
        try:
            try:
                return anyio.run(session)
            except BaseExceptionGroup as group:
                raise _leaf(group) from None
        except TimeoutError:
            raise ToolTimeout() from None
        except (ToolChanged, ToolError, SourceUnavailable):
            raise
        except Exception as exc:  # whatever the transport or the SDK raised: the source is not usable
            errlog.seek(0)
            raise SourceUnavailable(_described(_first(exc), errlog.read()[-400:].strip())) from exc


def _first(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _leaf(group: BaseExceptionGroup) -> BaseException:
    """Task groups wrap what the session body raised; ours are single, meaningful exceptions."""
    for exc in group.exceptions:
        found = _leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, (ToolChanged, ToolError, SourceUnavailable, TimeoutError)):
            return found
    return group


def discover(source: ToolSource) -> list[RemoteTool]:
    return _run(source, source.timeout_seconds, _list)


def call(source: ToolSource, *, remote_name: str, arguments: dict, fingerprint: str, timeout: float):
    """Call one tool, after checking the server still describes it as approved."""
    sent = []

    async def work(client: Client):
        current = next((t for t in await _list(client) if t.name == remote_name), None)
        if current is None or tool_fingerprint(current.description, current.input_schema) != fingerprint:
            raise ToolChanged(current)
        sent.append(True)  # from here on the server may have acted: never retried
        result = await client.call_tool(remote_name, arguments)
        return _data(result)

    allowed_now(source)
    if mcp_pool.idle_seconds() <= 0:
        return _run(source, timeout, work)
    return _pooled(source, timeout, work, sent)


def _pooled(source: ToolSource, timeout: float, work, sent: list):
    credential = credential_headers(source) if source.kind == ToolSource.Kind.MCP_HTTP else {}
    key, pool = mcp_pool.session_key(source, credential), mcp_pool.pool()

    def transport_for(errlog):
        # A kept session outlives this call: its HTTP client gets the source's timeout, the call its own deadline.
        return _transport(source, errlog, max(timeout, source.timeout_seconds))

    async def attempt():
        ends = time.monotonic() + timeout
        for last_try in (False, True):
            try:
                session, fresh = await pool.session(key, source.pk, transport_for, max(0.01, ends - time.monotonic()))
            except TimeoutError:
                raise
            except Exception as exc:  # the server did not start or did not speak MCP
                raise SourceUnavailable(_described(_first(_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc),
                                                   getattr(exc, "server_said", ""))) from exc
            session.last_used = time.monotonic()
            try:
                with anyio.fail_after(max(0.01, ends - time.monotonic())):
                    result = await work(session.client)
            except (ToolChanged, ToolError):
                raise  # the server answered: the session is fine
            except TimeoutError:
                await pool.close(session)  # stops a stdio server still busy with the overrun call
                raise
            except Exception as exc:
                said = session.server_said()
                await pool.close(session)
                if not fresh and not sent and not last_try:
                    continue  # it went away while idle, before anything was sent: once more, on a new session
                cause = _leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
                raise SourceUnavailable(_described(_first(cause), said)) from exc
            session.last_used, session.calls = time.monotonic(), session.calls + 1
            return result

    try:
        return pool.run(attempt(), timeout=timeout)
    except TimeoutError:
        raise ToolTimeout() from None


def _described(cause: BaseException, said: str) -> str:
    return f"{type(cause).__name__}: {cause}" + (f" (server said: {said})" if said else "")


def _data(result):
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content).strip()
        raise ToolError("tool_error", text[:2000] or "the MCP tool reported an error")
    if result.structured_content is not None:
        return result.structured_content
    parts = []
    for item in result.content:
        if item.type == "text":
            parts.append(item.text)
        else:
            # Images, audio and embedded resources are not text a model should read verbatim.
            parts.append({"type": item.type, "mime_type": getattr(item, "mime_type", None), "omitted": True})
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts
