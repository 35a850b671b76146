"""The one gate every tool call passes, whatever the tool's source: Python, MCP or OpenAPI.

Authorisation, approvals and exactly-once bookkeeping happen before this, in the harness and
runs.outbox. Here, for every call: the arguments are validated against the tool's schema, the
live registry is asked whether the tool may still run (enabled, not held, unchanged since the
run froze it), the call runs under its own deadline, and whatever happens the loop gets an
envelope.
"""

import json
import logging
from functools import lru_cache

import jsonschema
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError
from django.utils.module_loading import import_string

from agents.models import Tool, tool_fingerprint
from agents.sources import tool_hold
from agents.tools import mcp, openapi, pytools
from agents.tools.arguments import validate as validate_arguments
from agents.tools.deadline import ToolTimeout, deadline
from agents.tools.allowed import python_path_allowed
from agents.tools.envelopes import ToolContext, ToolError, error, ok
from core import stamp as governance_stamp

logger = logging.getLogger(__name__)


@lru_cache(maxsize=256)
def _handler(path: str):
    return import_string(path)


def dispatch(*, tool: dict, arguments: dict, ctx: ToolContext, stamp: str | None = None) -> dict:
    """Run one call and answer its envelope. `stamp`: the governance stamp read for this call
    already (by the gate's live grant check); by default it is read here."""
    name = tool["name"]
    try:
        validate_arguments(arguments, tool.get("input_schema") or {})
    except jsonschema.ValidationError as exc:
        return error("invalid_arguments", exc.message, path=list(exc.absolute_path))
    except jsonschema.SchemaError as exc:
        return error("invalid_arguments", f"the tool's schema is broken: {exc.message}")
    row = _live_row(name, stamp)
    refusal = _refusal(tool, row)
    if refusal is not None:
        return refusal
    timeout = float(tool.get("timeout_seconds") or row.timeout_seconds)
    try:
        data = _run(tool, row, arguments, ctx, timeout)
    except ToolError as exc:
        return error(exc.code, exc.message)
    except (SoftTimeLimitExceeded, DatabaseError):
        raise  # the task's time limit or a lost database: the step is abandoned and retried, not answered
    except (ToolTimeout, TimeoutError):
        return error("timeout", f"{name} did not answer within {timeout:g} seconds and was stopped")
    except mcp.ToolChanged as exc:
        tool_hold(tool=row, current=exc.current)
        return error("tool_changed", f"{name} changed at its source since it was approved; it is held until re-approved")
    except mcp.SourceUnavailable as exc:
        return error("tool_unavailable", f"{name}: its source cannot be reached ({exc})")
    except Exception as exc:  # a crashing tool must not crash the run: the model reads the envelope
        logger.exception("tool %s crashed", name)
        return error("tool_error", f"{name} failed: {type(exc).__name__}")
    try:
        size = len(json.dumps(data, ensure_ascii=False))
    except (TypeError, ValueError):
        return error("tool_error", f"{name} returned data that is not JSON")
    limit = settings.WARRANT["TOOL_RESULT_MAX_CHARS"]
    if size > limit:
        return error("result_too_large", f"{name} returned {size} characters; the limit is {limit}")
    return ok(data)


_rows_kept = governance_stamp.Kept(limit=2_000)


def _live_row(name: str, stamp: str | None = None) -> Tool | None:
    """The tool's registry row (with its source) as the database holds it now: kept while the
    governance stamp holds, which every write to tools and tool sources changes."""
    return _rows_kept.get_or_load(name, lambda: Tool.objects.select_related("tool_source").filter(name=name).first(),
                                  stamp=stamp)


def _refusal(tool: dict, row: Tool | None) -> dict | None:
    """Asked at call time, not only when the run froze its tools: a disabled or held tool stops at once."""
    name = tool["name"]
    if row is None or not row.enabled:
        return error("tool_unavailable", f"{name} is not enabled on this server")
    if row.held:
        return error("tool_held", f"{name} changed at its source and is held until a governance admin re-approves it")
    if row.tool_source_id is not None:
        if not row.tool_source.enabled:
            return error("tool_unavailable", f"{name}: its source {row.tool_source.name} is disabled")
        # The model was shown the frozen description; a tool re-approved since is not that tool.
        if tool.get("fingerprint") and tool["fingerprint"] != tool_fingerprint(row.description, row.input_schema):
            return error("tool_changed", f"{name} changed since this run started; start a new run to use it")
    return None


def _run(tool: dict, row: Tool, arguments: dict, ctx: ToolContext, timeout: float):
    if row.source == Tool.Source.MCP:
        return mcp.call(row.tool_source, remote_name=row.remote_name, arguments=arguments,
                        fingerprint=row.approved_sha256, timeout=timeout)
    if row.source == Tool.Source.OPENAPI:
        return openapi.call(row.tool_source, binding=row.binding, arguments=arguments, timeout=timeout,
                            idempotency_key=ctx.idempotency_key)
    if row.tool_source_id is not None and not python_path_allowed(row.handler):
        # Before the import: importing runs the module's code (WARRANT_PYTHON_TOOL_MODULES may have narrowed).
        raise ToolError("tool_unavailable", f"{row.name}: its module is outside the modules this deployment allows "
                                            "(WARRANT_PYTHON_TOOL_MODULES)")
    try:
        handler = _handler(row.handler)
    except Exception:  # a missing or broken module is this tool's problem, not the run's
        logger.exception("tool %s has no importable handler %s", row.name, row.handler)
        raise ToolError("tool_unavailable", f"{row.name} is not installed on this server") from None
    with deadline(timeout):
        if row.binding.get("style") == "kwargs":
            return pytools.invoke(handler, arguments, ctx)
        return handler(arguments, ctx)
