"""Open MCP sessions kept between calls, one per tool source and configuration, per process.

Starting an MCP server over stdio costs a process start and an initialize handshake on every
call (seconds for a Python server); an HTTP session costs its handshake. The pool keeps each
session open on one event loop running in a daemon thread of this process, and every call runs
on it under its own deadline. What stays the same as a session per call:

- every call lists the server's tools first and refuses one whose description or schema is not
  the approved one (the tool-poisoning check is per call, not per session);
- a call past its deadline closes its session, which stops a stdio server's process: nothing
  keeps running behind a timeout envelope;
- a session whose server went away while idle is replaced, and the call retried once, only when
  the failure came before the tool was called: a side effect is never sent twice.

A session is keyed by the source's id and everything that decides what is started or sent
(command, environment passthrough, URL, credential header and the credential's digest): a
changed source never reuses the old process, and its old session is closed. Sessions idle for
WARRANT_MCP_SESSION_IDLE_SECONDS are closed (0 turns the pool off: one session per call); at most
WARRANT_MCP_MAX_SESSIONS stay open, the least recently used closed first. A forked child (a
Celery prefork worker) starts its own pool; the parent's sessions are not shared.
"""

import asyncio
import atexit
import concurrent.futures
import hashlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field

import anyio
from django.conf import settings
from mcp import Client

REAP_EVERY_SECONDS = 15.0
CLOSE_TIMEOUT_SECONDS = 10.0


def idle_seconds() -> float:
    return float(settings.WARRANT.get("MCP_SESSION_IDLE_SECONDS", 300))


def max_sessions() -> int:
    return int(settings.WARRANT.get("MCP_MAX_SESSIONS", 32))


def session_key(source, credential: dict[str, str]) -> str:
    """What decides which process is started or which server is spoken to, as one digest."""
    from agents.tools.sandbox import isolation, passed_through

    material = {
        "id": source.pk, "kind": source.kind, "command": source.command, "url": source.url,
        # What the server is actually given: a variable dropped from WARRANT_SECRET_ENV_ALLOWED gets a new process.
        "env": sorted(passed_through(source).items()),
        "sandbox": isolation()["mode"],
        "credential": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in credential.items()},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(eq=False)
class Session:
    key: str
    source_id: int
    errlog: object
    client: Client | None = None
    closing: asyncio.Event | None = None
    task: asyncio.Task | None = None
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0
    dead: bool = False

    def server_said(self) -> str:
        try:
            self.errlog.seek(0, os.SEEK_END)
            size = self.errlog.tell()
            self.errlog.seek(max(0, size - 400))
            return self.errlog.read().strip()
        except (OSError, ValueError):
            return ""


class Pool:
    """The sessions of one process, on one event loop in a daemon thread."""

    def __init__(self):
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, Session] = {}
        self.opened = 0
        self.closed = 0
        self._thread = threading.Thread(target=self._serve, name="mcp-sessions", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_later(REAP_EVERY_SECONDS, self._reap_periodically)
        self.loop.run_forever()

    def _reap_periodically(self) -> None:
        self.loop.create_task(self._reap(time.monotonic()))
        self.loop.call_later(REAP_EVERY_SECONDS, self._reap_periodically)

    # --- called from any thread ------------------------------------------------------------

    def run(self, coroutine, *, timeout: float):
        """Run `coroutine` on the pool's loop; wait for it a little longer than its own deadline."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout + CLOSE_TIMEOUT_SECONDS + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError() from None

    def reap(self, now: float | None = None) -> int:
        """Close the sessions idle past the limit; how many were closed."""
        return self.run(self._reap(time.monotonic() if now is None else now), timeout=CLOSE_TIMEOUT_SECONDS)

    def close_all(self) -> None:
        if self.loop.is_running():
            self.run(self._close_all(), timeout=CLOSE_TIMEOUT_SECONDS)

    def stats(self) -> dict:
        return {"open": sum(not s.dead for s in self.sessions.values()), "opened": self.opened, "closed": self.closed}

    # --- on the loop -----------------------------------------------------------------------

    async def session(self, key: str, source_id: int, transport_for, timeout: float) -> tuple[Session, bool]:
        """The open session for `key`, or a new one; and whether it is new."""
        existing = self.sessions.get(key)
        if existing is not None and not existing.dead:
            return existing, False
        for other in [s for s in self.sessions.values() if s.source_id == source_id and s.key != key]:
            await self._close(other)  # the source changed: its old process must not linger
        while len(self.sessions) >= max_sessions():
            await self._close(min(self.sessions.values(), key=lambda s: s.last_used))
        return await self._open(key, source_id, transport_for, timeout), True

    async def _open(self, key: str, source_id: int, transport_for, timeout: float) -> Session:
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        session = Session(key=key, source_id=source_id, errlog=errlog, closing=asyncio.Event())
        ready = self.loop.create_future()

        async def hold():
            try:
                async with Client(transport_for(errlog), read_timeout_seconds=None) as client:
                    if not ready.done():
                        ready.set_result(client)
                    await session.closing.wait()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting opener, or the session is just dead
                if not ready.done():
                    ready.set_exception(exc)
            finally:
                session.dead = True
                if not ready.done():
                    ready.set_exception(ConnectionError("the MCP session ended before it was ready"))

        session.task = self.loop.create_task(hold())
        try:
            with anyio.fail_after(timeout):
                session.client = await asyncio.shield(ready)
        except BaseException as exc:
            said = session.server_said()
            await self._close(session)
            try:
                exc.server_said = said  # what the server wrote to stderr before it failed, for the error
            except AttributeError:
                pass
            raise
        self.sessions[key] = session
        self.opened += 1
        return session

    async def _close(self, session: Session) -> None:
        if self.sessions.get(session.key) is session:
            del self.sessions[session.key]
        session.dead = True
        session.closing.set()
        if session.task is not None and not session.task.done():
            try:
                with anyio.move_on_after(CLOSE_TIMEOUT_SECONDS):
                    await asyncio.shield(session.task)
            except BaseException:  # noqa: BLE001 - a session ending badly is still ended
                pass
            if not session.task.done():
                session.task.cancel()
        session.errlog.close()
        self.closed += 1

    async def close(self, session: Session) -> None:
        await self._close(session)

    async def _reap(self, now: float) -> int:
        limit = idle_seconds()
        stale = [s for s in self.sessions.values() if s.dead or now - s.last_used >= limit]
        for session in stale:
            await self._close(session)
        return len(stale)

    async def _close_all(self) -> None:
        for session in list(self.sessions.values()):
            await self._close(session)


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """This process's pool (a forked child gets a new one: threads do not survive a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool()
        return _pool


def existing_pool() -> Pool | None:
    return _pool if _pool is not None and _pool.pid == os.getpid() else None


@atexit.register
def _close_at_exit() -> None:
    current = existing_pool()
    if current is not None:
        try:
            current.close_all()
        except Exception:  # noqa: BLE001 - exiting anyway; stdio servers also see their stdin close
            pass
