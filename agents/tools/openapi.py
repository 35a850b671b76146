"""OpenAPI 3 services as tool sources: one tool per operation, called through httpx.

An operation's parameters and JSON body become one JSON schema (the body under "body"); its
binding records where each argument goes. GET, HEAD and OPTIONS are read-only; every other
method changes something, so the tool is side-effecting and needs approval by default.
"""

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urljoin

import httpx
import yaml

from agents.models import ToolSource
from agents.services import tool_host_allowed
from agents.tools.allowed import tool_egress_rule
from agents.tools.deadline import ToolTimeout
from agents.tools.envelopes import ToolError
from agents.tools.mcp import SourceUnavailable, credential_headers
from core import egress

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
READ_ONLY = {"get", "head", "options"}
MAX_DOCUMENT_BYTES = 5 * 1024 * 1024
MAX_RESPONSE_BYTES = 1024 * 1024
MAX_REF_DEPTH = 12
IDEMPOTENCY_HEADER = "Idempotency-Key"


class DocumentError(ValueError):
    """Not an OpenAPI 3 document we can import."""


@dataclass(frozen=True)
class Operation:
    name: str
    description: str
    input_schema: dict
    binding: dict
    read_only: bool


def load_document(source: ToolSource) -> dict:
    if source.document is not None:
        document = source.document
    elif source.path:
        try:
            # Opening a FIFO blocks and a device (/dev/zero) never ends: documents are regular files.
            if not Path(source.path).is_file():
                raise DocumentError(f"cannot read {source.path}: not a regular file")
            with Path(source.path).open("rb") as file:
                raw = file.read(MAX_DOCUMENT_BYTES + 1)
            document = _decode(raw)
        except OSError as exc:
            raise DocumentError(f"cannot read {source.path}: {exc.strerror}") from None
    elif source.url:
        try:
            with egress.client(**tool_egress_rule(), timeout=httpx.Timeout(source.timeout_seconds),
                               follow_redirects=False) as client:
                response = client.get(source.url, headers=credential_headers(source))
            response.raise_for_status()
        except egress.EgressRefused as exc:
            raise DocumentError(f"cannot fetch {source.url}: {exc}") from None
        except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:  # a URL httpx cannot use is no document either
            raise DocumentError(f"cannot fetch {source.url}: {exc}") from None
        document = _decode(response.content[: MAX_DOCUMENT_BYTES + 1])
    else:
        raise DocumentError("give the document, its file path or its URL")
    if not isinstance(document, dict) or not str(document.get("openapi", "")).startswith("3."):
        raise DocumentError("not an OpenAPI 3 document: the 'openapi' field must be 3.x")
    if not isinstance(document.get("paths"), dict):
        raise DocumentError("the document has no 'paths'")
    return document


def _decode(raw: bytes):
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"the document is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        return yaml.safe_load(raw)  # JSON is YAML
    except yaml.YAMLError as exc:
        # Where and what, never the snippet PyYAML quotes: `path` may name any file the server can
        # read, and the error is kept on the source and shown to whoever syncs it.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DocumentError(f"the document is neither JSON nor YAML: {getattr(exc, 'problem', None) or 'unreadable'}{where}") from None


def _resolve(document: dict, node, depth: int = 0):
    """Inline local $refs; a recursive schema is cut at MAX_REF_DEPTH to an open object."""
    if depth > MAX_REF_DEPTH:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/"):
                raise DocumentError(f"only local references are supported, not {ref!r}")
            target = document
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise DocumentError(f"the reference {ref!r} points nowhere")
                target = target[part]
            return _resolve(document, target, depth + 1)
        return {k: _resolve(document, v, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(document, v, depth + 1) for v in node]
    return node


def _schema(node: dict) -> dict:
    """An OpenAPI 3.0 schema as JSON Schema: `nullable` becomes a null type; doc-only keys go."""
    if not isinstance(node, dict):
        return node
    out = {k: (_schema(v) if isinstance(v, dict) else [_schema(i) for i in v] if isinstance(v, list) else v)
           for k, v in node.items() if k not in ("nullable", "example", "xml", "externalDocs", "discriminator",
                                                   "readOnly", "writeOnly", "deprecated")}
    if "properties" in node:
        out["properties"] = {k: _schema(v) for k, v in node["properties"].items()}
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _name(operation: dict, method: str, path: str) -> str:
    raw = operation.get("operationId") or f"{method}_{path}"
    return re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_-")[:48] or method


def operations(document: dict) -> list[Operation]:
    """Every operation as a tool. The document is untrusted: a part not shaped as OpenAPI 3 says
    (a path item that is a number, a parameter without a name) makes it unusable, not a crash."""
    try:
        return _operations(document)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise DocumentError(f"the document is not shaped as OpenAPI 3 describes ({type(exc).__name__}: {exc})") from None


def _operations(document: dict) -> list[Operation]:
    found = []
    for path, item in document["paths"].items():
        item = _resolve(document, item)
        shared = item.get("parameters", [])
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                found.append(_operation(document, method, path, operation, shared))
    return found


def _operation(document, method, path, operation, shared) -> Operation:
    operation = _resolve(document, operation)
    params = {(p["name"], p["in"]): p for p in shared + operation.get("parameters", []) if p.get("in") != "cookie"}
    properties, required, places = {}, [], {}
    # An operation that declares an Idempotency-Key header says its service honours one: the
    # outbox supplies it (the side effect's key), not the model.
    declares_key = any(where == "header" and name.lower() == IDEMPOTENCY_HEADER.lower() for name, where in params)
    for (name, where), param in params.items():
        if where == "header" and name.lower() in ("authorization", "content-type", "accept", IDEMPOTENCY_HEADER.lower()):
            continue
        key = name if name not in properties else f"{where}_{name}"
        schema = _schema(param.get("schema", {"type": "string"}))
        if param.get("description"):
            schema = {**schema, "description": param["description"]}
        properties[key] = schema
        places[key] = {"in": where, "name": name}
        if param.get("required") or where == "path":
            required.append(key)
    body = operation.get("requestBody")
    has_body = False
    if isinstance(body, dict):
        content = body.get("content", {})
        media = next((m for m in content if m == "application/json" or m.endswith("+json")), None)
        if media is not None:
            has_body = True
            properties["body"] = _schema(content[media].get("schema", {}))
            if body.get("required"):
                required.append("body")
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    text = " ".join(p for p in (operation.get("summary", ""), operation.get("description", "")) if p).strip()
    return Operation(
        name=_name(operation, method, path),
        description=(text or f"{method.upper()} {path}")[:4000],
        input_schema=schema,
        binding={"method": method.upper(), "path": path, "params": places, "body": has_body}
        | ({"idempotency_key": True} if declares_key else {}),
        read_only=method in READ_ONLY,
    )


def default_base_url(source: ToolSource, document: dict) -> str:
    servers = document.get("servers") or [{"url": "/"}]
    first = servers[0] if isinstance(servers, list) else None
    if not isinstance(first, dict) or not isinstance(first.get("url", "/"), str):
        raise DocumentError("the document's 'servers' is not a list of objects with a 'url'")
    return urljoin(source.url or "", first.get("url", "/"))


def call(source: ToolSource, *, binding: dict, arguments: dict, timeout: float, idempotency_key: str = ""):
    """`idempotency_key`: the side effect's key (runs.outbox), sent as the Idempotency-Key header,
    so a service that honours it acts once however often the call reaches it."""
    base = source.base_url
    if not base:
        raise ToolError("tool_unavailable", "the source has no base URL; set one and sync")
    path, query, headers = binding["path"], {}, {}
    for key, place in binding["params"].items():
        if key not in arguments:
            continue
        value = arguments[key]
        if place["in"] == "path":
            path = path.replace("{" + place["name"] + "}", quote(str(value), safe=""))
        elif place["in"] == "query":
            query[place["name"]] = value
        elif place["in"] == "header":
            headers[place["name"]] = str(value)
    try:
        headers |= credential_headers(source)
    except SourceUnavailable as exc:
        raise ToolError("tool_unavailable", str(exc)) from None
    url = base.rstrip("/") + "/" + path.lstrip("/")
    if not tool_host_allowed(url):  # checked at every call: the allowed hosts may have narrowed since the sync
        raise ToolError("tool_unavailable", "the source's host is not among the hosts this deployment allows "
                                            "(WARRANT_TOOL_ALLOWED_HOSTS)")
    if idempotency_key:
        headers[IDEMPOTENCY_HEADER] = idempotency_key
    content = json.dumps(arguments["body"]).encode() if binding["body"] and "body" in arguments else None
    if content is not None:
        headers["Content-Type"] = "application/json"
    # httpx timeouts bound each phase; the deadline below bounds the whole exchange, so a
    # server trickling bytes cannot hold the call open past the tool's timeout either.
    stop = time.monotonic() + timeout
    try:
        with egress.client(**tool_egress_rule(), timeout=httpx.Timeout(timeout), follow_redirects=False) as client:
            with client.stream(binding["method"], url, params=query, headers=headers, content=content) as response:
                raw = bytearray()
                for chunk in response.iter_bytes():
                    raw.extend(chunk)
                    if time.monotonic() > stop:
                        raise ToolTimeout()
                    if len(raw) > MAX_RESPONSE_BYTES:
                        raise ToolError("result_too_large", f"the response is larger than {MAX_RESPONSE_BYTES} bytes")
    except egress.EgressRefused as exc:
        raise ToolError("tool_unavailable", f"the service may not be reached: {exc}") from None
    except httpx.TimeoutException:
        raise ToolTimeout() from None
    except httpx.HTTPError as exc:
        raise ToolError("tool_unavailable", f"{type(exc).__name__}: {exc}") from None
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = raw.decode("utf-8", errors="replace")
    if response.status_code >= 400:
        raise ToolError(f"http_{response.status_code}", json.dumps(data)[:2000] if data is not None else "")
    return {"status": response.status_code, "body": data}
