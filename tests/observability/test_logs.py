"""JSON log lines: timestamp, level, logger, request id, run id, user; secrets redacted; one line each.

The handler here is the one warrant.logs.logging_config builds (its filters and formatter, by
the same dotted paths), writing to a buffer instead of stderr.
"""

import io
import json
import logging
import logging.config
import re
import uuid

import pytest
from django.conf import settings
from django.test import override_settings

from core import logctx
from warrant import logs

pytestmark = pytest.mark.django_db

MIDDLEWARE = settings.MIDDLEWARE if "warrant.logs.RequestIdMiddleware" in settings.MIDDLEWARE else [
    "warrant.logs.RequestIdMiddleware", *settings.MIDDLEWARE]


@pytest.fixture
def lines():
    """The lines the configured handler writes (JSON), as a list that fills as the test logs."""
    config = logs.logging_config(debug=False)
    handler_config = config["handlers"]["console"]
    built = logging.config.DictConfigurator(config)
    filters = [built.configure_filter(config["filters"][name]) for name in handler_config["filters"]]
    formatter = built.configure_formatter(config["formatters"][handler_config["formatter"]])
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    for each in filters:
        handler.addFilter(each)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)

    class Lines:
        def read(self):
            return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]

    yield Lines()
    root.removeHandler(handler)
    root.setLevel(level)


def test_production_writes_json_and_debug_console(monkeypatch):
    monkeypatch.delenv("WARRANT_LOG_FORMAT", raising=False)
    assert logs.logging_config(debug=False)["handlers"]["console"]["formatter"] == "json"
    assert logs.logging_config(debug=True)["handlers"]["console"]["formatter"] == "console"
    monkeypatch.setenv("WARRANT_LOG_FORMAT", "json")
    assert logs.logging_config(debug=True)["handlers"]["console"]["formatter"] == "json"
    monkeypatch.setenv("WARRANT_LOG_FORMAT", "console")
    assert logs.logging_config(debug=False)["handlers"]["console"]["formatter"] == "console"
    # The redaction filter stays on the one handler, whichever format.
    assert logs.logging_config(debug=False)["handlers"]["console"]["filters"] == ["context", "redact"]


def test_a_line_is_one_json_object_with_its_context_and_no_secret(lines, monkeypatch):
    secret = "s3cr3t-value-of-a-test-key-0123456789"
    monkeypatch.setenv("TEST_SERVICE_API_KEY", secret)
    card = "4111 1111 1111 1111"
    run_id = str(uuid.uuid4())
    with logctx.run_context(run_id, user_name="operator"):
        logging.getLogger("runs.advance").warning("calling with %s and card %s\nsecond line", secret, card,
                                                   extra={"detail": f"key={secret}", "nested": {"card": card}})
    try:
        raise ValueError(f"boom {secret}")
    except ValueError:
        logging.getLogger("runs.advance").exception("crashed")
    first, second = lines.read()
    assert first["level"] == "WARNING" and first["logger"] == "runs.advance"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["timestamp"])
    assert first["run_id"] == run_id and first["user"] == "operator"
    assert "second line" in first["message"]  # the newline is escaped inside the one JSON line
    text = json.dumps([first, second])
    assert secret not in text and "4111 1111 1111 1111" not in text
    assert "[redacted:api_key]" in first["message"] and "[redacted:card_number]" in first["message"]
    assert "[redacted" in first["detail"] and first["nested"]["card"] == "[redacted:card_number]"
    # Outside the run's block the line names no run.
    assert "run_id" not in second and "user" not in second
    assert second["level"] == "ERROR" and "ValueError" in second["exc_info"] and secret not in second["exc_info"]


@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_the_request_id_is_kept_echoed_and_on_the_requests_lines(lines, operator):
    missing = f"/api/v1/runs/{uuid.uuid4()}/"
    answer = operator.get(missing, HTTP_X_REQUEST_ID="lb-7f3a.2:abc")
    assert answer.status_code == 404 and answer["X-Request-ID"] == "lb-7f3a.2:abc"
    # Django's own "Not Found" line, written after the middleware returned, still names the request and its user.
    line = next(entry for entry in lines.read() if entry["logger"] == "django.request")
    assert line["request_id"] == "lb-7f3a.2:abc" and line["user"] == "operator" and line["level"] == "WARNING"
    # Once the request has finished, lines name no request.
    logging.getLogger("elsewhere").warning("between requests")
    assert "request_id" not in lines.read()[-1]


@override_settings(MIDDLEWARE=MIDDLEWARE)
@pytest.mark.parametrize("given", ["", "has space", "x" * 129, "new\nline", '"quoted"', "../../etc"])
def test_an_ill_formed_request_id_is_replaced(client, given):
    headers = {"HTTP_X_REQUEST_ID": given} if given else {}
    answer = client.get("/healthz", **headers)
    assert answer.status_code == 200 and re.fullmatch(r"[0-9a-f]{32}", answer["X-Request-ID"])


def test_console_lines_are_plain_text():
    record = logging.LogRecord("runs.advance", logging.INFO, __file__, 1, "run %s parked", ("r-1",), None)
    logs.ContextFilter().filter(record)
    with logctx.run_context("r-1", user_name="operator"):
        logs.ContextFilter().filter(record)
    line = logs.ConsoleFormatter().format(record)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO runs\.advance \[run=r-1 user=operator\] run r-1 parked",
                        line)
