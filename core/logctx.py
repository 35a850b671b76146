"""What a log line says it belongs to: the request, the run and the user (contextvars).

The request-id middleware (warrant.logs) sets the request; a worker advancing a run sets the run
(`with run_context(...)`). warrant.logs' filter reads both into every record. Here, in core, so
that runs/ and agents/ can set them without importing the project package.
"""

import contextvars
import re
import uuid
from contextlib import contextmanager

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("warrant_request_id", default="")
run_id: contextvars.ContextVar[str] = contextvars.ContextVar("warrant_run_id", default="")
# The user, as a name already known, or the request whose user is read when a line is written
# (DRF authenticates inside the view, after the middleware ran).
user: contextvars.ContextVar[str] = contextvars.ContextVar("warrant_user", default="")
request: contextvars.ContextVar[object | None] = contextvars.ContextVar("warrant_request", default=None)

# A client's X-Request-ID is kept when it looks like an id (letters, digits, - _ . : /, at most
# 128): anything else is replaced, so a header cannot forge log lines or carry a payload.
_WELL_FORMED = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}\Z")


def accept_request_id(header: str | None) -> str:
    """The client's id when well formed, else a new one (32 hex digits)."""
    if header and _WELL_FORMED.match(header):
        return header
    return uuid.uuid4().hex


@contextmanager
def run_context(run_id_value: str, *, user_name: str = ""):
    """Log lines written inside belong to this run (and, when given, to its caller)."""
    tokens = [(run_id, run_id.set(str(run_id_value)))]
    if user_name:
        tokens.append((user, user.set(user_name)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_user() -> str:
    """The user a line belongs to: the run's caller, else the request's user if already
    authenticated (never evaluated here: a log call must not query the database)."""
    name = user.get()
    if name:
        return name
    req = request.get()
    if req is None:
        return ""
    found = getattr(req, "__dict__", {}).get("user")
    if found is None:
        return ""
    wrapped = getattr(found, "__dict__", {}).get("_wrapped", found)  # a SimpleLazyObject not yet read
    if wrapped is None or type(wrapped).__name__ == "object":
        return ""
    if not getattr(wrapped, "is_authenticated", False):
        return ""
    return getattr(wrapped, "username", "") or ""
