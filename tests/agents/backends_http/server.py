"""A real HTTP server on loopback that plays a model server: the tests script its replies.

Each reply is a Reply (status, JSON or raw bytes, headers, a delay, a cut-off body) or a function
of the request that returns one. Every request is recorded as it arrived (path, headers, JSON).
Ports come from WARRANT_TEST_MODEL_PORTS (a range, default 18100-18199), first free one wins.
"""

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from tests import loopback


@dataclass
class Reply:
    status: int = 200
    json: object = None
    body: bytes | None = None
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line: a hang when longer than the read timeout
    cut_after: int | None = None  # send this many bytes of the body, then drop the connection
    no_length: bool = False  # no Content-Length: the body ends when the connection closes

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        return json.dumps(self.json).encode()


@dataclass
class Seen:
    path: str
    headers: dict
    json: object


class ModelServer:
    def __init__(self):
        self.replies: list[Reply | Callable[[Seen], Reply]] = []
        self.default: Callable[[Seen], Reply] | None = None
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._httpd = _bind(self._handler())
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        loopback.start(self._httpd)

    def script(self, *replies) -> None:
        self.replies.extend(replies)

    def close(self) -> None:
        loopback.stop(self._httpd)

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            reply = self.replies.pop(0) if self.replies else self.default
        if reply is None:
            return Reply(500, {"error": {"message": "the test scripted no reply"}})
        return reply(seen) if callable(reply) else reply

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(seen)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.payload()
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": "application/json"} | reply.headers
                    for name, value in headers.items():
                        self.send_header(name, value)
                    if reply.no_length:
                        self.send_header("Connection", "close")
                    else:
                        self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if reply.cut_after is not None:
                        self.wfile.write(payload[:reply.cut_after])
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self.wfile.write(payload)
                    if reply.no_length:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a timeout or a size limit): what the test wanted

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        # A client that gave up (a timeout, a size limit) may reset the connection before its
        # request was read: what the test wanted, not an error of the server.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def _bind(handler) -> ThreadingHTTPServer:
    first, _, last = os.environ.get("WARRANT_TEST_MODEL_PORTS", "18100-18199").partition("-")
    for port in range(int(first), int(last or first) + 1):
        try:
            return _Server(("127.0.0.1", port), handler)
        except OSError:
            continue
    raise RuntimeError("no free port in WARRANT_TEST_MODEL_PORTS")


def profile_spec(server: ModelServer, backend: str = "openai", **extra) -> dict:
    """A profile spec as an agent version freezes it."""
    return {"name": f"{backend}-test", "backend": backend, "base_url": server.url, "model": "test-model",
            "api_key_env": "", "connect_timeout": 2.0, "read_timeout": 5.0, "max_retries": 2, "fallbacks": []} | extra
