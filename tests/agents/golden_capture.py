"""Records every request the scripted backend answers during a test session, for the golden file.

Loaded with `-p`, it wraps `ScriptedBackend.complete` for the session only and, at the end, writes
each distinct request with the response it got to the file named by WARRANT_SCRIPTED_GOLDEN. The
requests are the real ones: the harness builds them with runs.context from the demo, the HTTP
backends' loopback server rebuilds them from the wire, and tests/agents/test_scripted_*.py build
them turn by turn. tests/agents/test_scripted_golden.py replays the file.

Rewrite the file only when a change of the scripted model's answers is intended:

    WARRANT_SCRIPTED_GOLDEN=tests/agents/scripted_golden.json .venv/bin/python -m pytest \
        -p tests.agents.golden_capture tests/agents tests/runs tests/security tests/admin
"""

import json
import os

from agents.backends.scripted import ScriptedBackend
from tests.agents.golden import request_to_json, response_to_json, write_golden

_seen: dict[str, dict] = {}
_current = {"test": ""}


def pytest_configure(config):
    if not os.environ.get("WARRANT_SCRIPTED_GOLDEN"):
        return
    original = ScriptedBackend.complete

    def recording(self, request):
        response = original(self, request)
        if "test_scripted_golden" in _current["test"]:
            return response  # the replay of the file itself is no new request
        recorded = request_to_json(request)
        key = json.dumps(recorded, ensure_ascii=False)
        _seen.setdefault(key, {"test": _current["test"], "request": recorded,
                               "response": response_to_json(response)})
        return response

    ScriptedBackend.complete = recording


def pytest_runtest_setup(item):
    _current["test"] = item.nodeid


def pytest_sessionfinish(session):
    path = os.environ.get("WARRANT_SCRIPTED_GOLDEN")
    if path and _seen:
        write_golden(path, list(_seen.values()))
