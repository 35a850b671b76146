"""A real HTTP service on loopback for the durability suite: it acts on POSTs, slowly, and says
what it received, so a test can count how often an effect reached it.

POST /acts/keyed honours the Idempotency-Key header (a second request under a key it has acted
on returns the first response and does not act again); POST /acts/plain does not (every request
acts). Each waits `hold` seconds (the server's, settable) before it answers, and a test may hold
an answer until it says so (`gate`): the window in which the worker is killed after its call
reached the service and before it recorded the result.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import loopback

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "slow acts", "version": "1"},
    "paths": {
        "/acts/keyed": {"post": {
            "operationId": "act_keyed", "summary": "Do a thing once per Idempotency-Key, slowly.",
            "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]}}}},
            "responses": {"200": {"description": "done"}}}},
        "/acts/plain": {"post": {
            "operationId": "act_plain", "summary": "Do a thing, slowly, every time it is asked.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]}}}},
            "responses": {"200": {"description": "done"}}}},
    },
}


class SlowService:
    def __init__(self, port: int):
        self.port = port
        self.hold = 0.0
        self.requests: list[dict] = []  # every request that arrived: path, key, body, at
        self.acted: list[dict] = []  # every time the service acted
        self.arrived = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self._answers: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "SlowService":
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                key = self.headers.get("Idempotency-Key", "")
                with service._lock:
                    service.requests.append({"path": self.path, "key": key, "body": body, "at": time.time()})
                    seen = service._answers.get(key) if self.path == "/acts/keyed" and key else None
                    if seen is None:
                        answer = {"act": len(service.acted) + 1, "what": body.get("what")}
                        service.acted.append({"path": self.path, "key": key, "body": body})
                        if self.path == "/acts/keyed" and key:
                            service._answers[key] = answer
                service.arrived.set()
                time.sleep(service.hold)
                service.gate.wait()
                payload = json.dumps(seen or answer).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the caller died while we held the answer

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        loopback.start(self._server)
        return self

    def stop(self) -> None:
        self.gate.set()  # an answer still held must not keep its handler (and the test) waiting
        if self._server is not None:
            loopback.stop(self._server)
            self._server = None

    def duplicates(self) -> int:
        """Acts beyond one per distinct request body: an effect the service performed twice."""
        bodies = [json.dumps(a["body"], sort_keys=True) for a in self.acted]
        return len(bodies) - len(set(bodies))
