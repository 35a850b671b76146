"""Logs: one line per event, JSON in production, plain text under `make run`.

Every line names its time (ISO 8601, UTC), level, logger, the request (X-Request-ID), the run a
worker is advancing, the user, and the trace and span when tracing is on. Secrets are redacted
twice: governance.redaction.RedactingFilter rewrites the message and the traceback, and the JSON
formatter redacts every other string it writes (a value passed in `extra=` included).

LOGGING (warrant/settings.py) is `logging_config(DEBUG)`: WARRANT_LOG_FORMAT=json|console chooses,
and without it DEBUG (make run, runserver) writes console lines and everything else JSON.
"""

import logging
import os
from datetime import datetime, timezone

from celery import signals as celery_signals
from django.core.signals import request_finished
from django.dispatch import receiver
from pythonjsonlogger.json import JsonFormatter

from core import logctx

REQUEST_ID_HEADER = "X-Request-ID"
_CELERY_HEADER = "warrant_request_id"


def log_format(debug: bool) -> str:
    chosen = os.environ.get("WARRANT_LOG_FORMAT", "").strip().lower()
    if chosen in {"json", "console"}:
        return chosen
    return "console" if debug else "json"


def logging_config(debug: bool) -> dict:
    """The LOGGING dict: one handler on stderr, the context and redaction filters, one formatter."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": "warrant.logs.ContextFilter"},
            "redact": {"()": "governance.redaction.RedactingFilter"},
        },
        "formatters": {
            "json": {"()": "warrant.logs.WarrantJsonFormatter"},
            "console": {"()": "warrant.logs.ConsoleFormatter"},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["context", "redact"],
                                 "formatter": log_format(debug)}},
        "root": {"handlers": ["console"], "level": os.environ.get("WARRANT_LOG_LEVEL", "INFO")},
        # Django's own loggers write through the root handler (one format for every line).
        "loggers": {"django": {"handlers": [], "propagate": True, "level": os.environ.get("WARRANT_LOG_LEVEL", "INFO")}},
    }


class ContextFilter(logging.Filter):
    """Puts request_id, run_id, user, trace_id and span_id on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = logctx.request_id.get()
        record.run_id = logctx.run_id.get()
        record.user = logctx.current_user()
        record.trace_id, record.span_id = _trace_ids()
        return True


def _trace_ids() -> tuple[str, str]:
    from core import telemetry  # cheap: a module attribute when tracing is off

    return telemetry.current_ids()


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class WarrantJsonFormatter(JsonFormatter):
    """{"timestamp", "level", "logger", "message", "request_id", "run_id", "user", ...} on one line."""

    CONTEXT = ("request_id", "run_id", "user", "trace_id", "span_id")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("fmt", ["message"])
        kwargs.setdefault("json_ensure_ascii", False)
        super().__init__(*args, **kwargs)

    def add_fields(self, log_data: dict, record: logging.LogRecord, message_dict: dict) -> None:
        log_data["timestamp"] = _iso(record.created)
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        super().add_fields(log_data, record, message_dict)
        for name in self.CONTEXT:
            value = getattr(record, name, "")
            if value:
                log_data[name] = value
            else:
                log_data.pop(name, None)

    def process_log_record(self, log_data: dict) -> dict:
        from governance.redaction import env_secrets, redact

        secrets = env_secrets()
        return {key: (redact(value, kinds=("api_keys", "card_numbers"), secrets=secrets)
                      if key not in {"timestamp", "level", "logger"} else value)
                for key, value in log_data.items()}


class ConsoleFormatter(logging.Formatter):
    """2026-12-01 19:40:00.123 INFO runs.advance [req=… run=… user=…] the message"""

    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{label}={value}" for label, value in (
            ("req", getattr(record, "request_id", "")), ("run", getattr(record, "run_id", "")),
            ("user", getattr(record, "user", ""))) if value)
        line = f"{_iso(record.created)[:-1].replace('T', ' ')} {record.levelname} {record.name}"
        line += f" [{context}] " if context else " "
        line += record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


class RequestIdMiddleware:
    """First in MIDDLEWARE: takes the client's X-Request-ID when well formed (else makes one), keeps it
    (and the request, for its user) for the log lines of the request, and echoes it in the response.

    Kept until the request has finished (request_finished), not only while the middleware runs:
    Django writes its own "Not Found: /…" line after the middleware chain has returned."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rid = logctx.accept_request_id(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = rid
        logctx.request_id.set(rid)
        logctx.request.set(request)
        from core import telemetry

        telemetry.annotate_current({"warrant.request_id": rid})
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = rid
        return response


@receiver(request_finished, dispatch_uid="warrant.logs.request_finished")
def _request_finished(**kwargs):
    logctx.request_id.set("")
    logctx.request.set(None)


# A task enqueued during a request carries its id, so the worker's lines name the request too.
@celery_signals.before_task_publish.connect(weak=False)
def _publish_request_id(headers=None, **kwargs):
    rid = logctx.request_id.get()
    if rid and headers is not None:
        headers[_CELERY_HEADER] = rid


_task_tokens: dict[str, object] = {}


@celery_signals.task_prerun.connect(weak=False)
def _task_request_id(task_id=None, task=None, **kwargs):
    rid = getattr(getattr(task, "request", None), _CELERY_HEADER, None)
    if rid and task_id and not logctx.request_id.get():
        _task_tokens[task_id] = logctx.request_id.set(logctx.accept_request_id(str(rid)))


@celery_signals.task_postrun.connect(weak=False)
def _task_done(task_id=None, **kwargs):
    token = _task_tokens.pop(task_id, None) if task_id else None
    if token is not None:
        logctx.request_id.reset(token)
