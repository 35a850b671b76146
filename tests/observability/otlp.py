"""An OTLP/HTTP trace receiver on loopback: what a collector would get, decoded with opentelemetry-proto."""

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from tests import loopback


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict
    events: list[tuple[str, dict]]
    links: list[tuple[str, str]]  # (trace id, span id)
    status_code: int
    service: str = ""
    scope: str = ""

    def events_named(self, name: str) -> list[dict]:
        return [attrs for event, attrs in self.events if event == name]


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(pairs) -> dict:
    return {kv.key: _value(kv.value) for kv in pairs}


@dataclass
class Receiver:
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    witnessed: list[bytes] = field(default_factory=list)  # what was POSTed to /witness (an HTTP witness sink)
    content_types: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decode(self, body: bytes) -> None:
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        found = []
        for resource_spans in message.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    found.append(Span(
                        name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(), kind=s.kind, attributes=_attributes(s.attributes),
                        events=[(e.name, _attributes(e.attributes)) for e in s.events],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        status_code=s.status.code, service=service, scope=scope_spans.scope.name))
        with self.lock:
            self.requests += 1
            self.spans.extend(found)

    def named(self, prefix: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name.startswith(prefix)]


def serve(port: int) -> tuple[ThreadingHTTPServer, Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/witness":
                receiver.witnessed.append(body)
                self.send_response(204)
                self.end_headers()
                return
            receiver.content_types.add(self.headers.get("Content-Type"))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            receiver.decode(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    loopback.start(server)
    return server, receiver
