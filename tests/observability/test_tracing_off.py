"""Without OTEL_EXPORTER_OTLP_ENDPOINT, tracing costs nothing: the SDK is never imported and every hook
returns at its first line."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import telemetry

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import warrant.wsgi  # the web process as it starts: settings, middleware, the application
from warrant import telemetry as setup
from core import telemetry
print(setup.setup(), telemetry.enabled(), sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
"""


@pytest.mark.slow
def test_the_web_process_starts_without_the_sdk():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(DJANGO_DEBUG="1", DJANGO_SETTINGS_MODULE="warrant.settings", WARRANT_EMBEDDED_RECONCILE_SECONDS="0")
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "False False []"


def test_the_hooks_do_nothing_when_off(monkeypatch):
    monkeypatch.setattr(telemetry, "_tracer", None)
    with telemetry.chat_span(None, [{"name": "p", "backend": "scripted", "model": "m"}]) as span:
        assert span is telemetry.OFF
    envelope = {"ok": True, "data": 1}
    with telemetry.tool_span({"id": "call_1_1", "name": "t"}, {}) as span:
        assert span is telemetry.OFF and span.done(envelope) is envelope
    assert telemetry.current_ids() == ("", "")
