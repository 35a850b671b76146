"""The one gate every tool call passes: resolve the handler, run it, always return an envelope.

Authorisation, approvals and exactly-once bookkeeping happen before this, in the harness and
runs.outbox; this module guarantees that whatever the handler does, the loop gets an envelope.
"""

import json
import logging
from functools import lru_cache

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError
from django.utils.module_loading import import_string

from agents.tools.envelopes import ToolContext, ToolError, error, ok

logger = logging.getLogger(__name__)


@lru_cache(maxsize=256)
def _handler(path: str):
    return import_string(path)


def dispatch(*, tool: dict, arguments: dict, ctx: ToolContext) -> dict:
    try:
        handler = _handler(tool["handler"])
    except Exception:  # a missing or broken module is this tool's problem, not the run's
        logger.exception("tool %s has no importable handler %s", tool["name"], tool["handler"])
        return error("tool_unavailable", f"{tool['name']} is not installed on this server")
    try:
        data = handler(arguments, ctx)
    except ToolError as exc:
        return error(exc.code, exc.message)
    except (SoftTimeLimitExceeded, DatabaseError):
        raise  # the task's time limit or a lost database: the step is abandoned and retried, not answered
    except TimeoutError:
        return error("timeout", f"{tool['name']} did not answer in time")
    except Exception as exc:  # a crashing tool must not crash the run: the model reads the envelope
        logger.exception("tool %s crashed", tool["name"])
        return error("tool_error", f"{tool['name']} failed: {type(exc).__name__}")
    try:
        size = len(json.dumps(data, ensure_ascii=False))
    except (TypeError, ValueError):
        return error("tool_error", f"{tool['name']} returned data that is not JSON")
    limit = settings.WARRANT["TOOL_RESULT_MAX_CHARS"]
    if size > limit:
        return error("result_too_large", f"{tool['name']} returned {size} characters; the limit is {limit}")
    return ok(data)
