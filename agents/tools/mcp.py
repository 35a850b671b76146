"""MCP servers as tool sources, through the official `mcp` SDK.

One session per operation: connect, (list), call, disconnect. Nothing is kept open between
calls, so a Celery worker holds no state and a hung server cannot outlive its call: the whole
session runs under one deadline, and leaving it terminates a stdio server's process.
"""

import os
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from agents.models import ToolSource, tool_fingerprint
from agents.tools.deadline import ToolTimeout
from agents.tools.envelopes import ToolError

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
    value = os.environ.get(source.auth_env, "")
    if not value:
        # Fail closed: a call without its credential would be a different, unauthenticated call.
        raise SourceUnavailable(f"the environment variable {source.auth_env or '(none)'} holding the credential is not set")
    return {source.auth_header: value}


def _transport(source: ToolSource, errlog, timeout: float):
    if source.kind == ToolSource.Kind.MCP_STDIO:
        program, *args = source.command
        env = {name: os.environ[name] for name in source.env_passthrough if name in os.environ}
        return stdio_client(StdioServerParameters(command=program, args=args, env=env), errlog=errlog)
    return _http_transport(source.url, credential_headers(source), timeout)


@asynccontextmanager
async def _http_transport(url: str, headers: dict, timeout: float):
    # The SDK leaves a client it was given open; this one is ours to close with the session.
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout)) as client:
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
            cause = _first(exc)
            errlog.seek(0)
            tail = errlog.read()[-400:].strip()
            raise SourceUnavailable(f"{type(cause).__name__}: {cause}" + (f" (server said: {tail})" if tail else "")) from exc


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

    async def work(client: Client):
        current = next((t for t in await _list(client) if t.name == remote_name), None)
        if current is None or tool_fingerprint(current.description, current.input_schema) != fingerprint:
            raise ToolChanged(current)
        result = await client.call_tool(remote_name, arguments)
        return _data(result)

    return _run(source, timeout, work)


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
