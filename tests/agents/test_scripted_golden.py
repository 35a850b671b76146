"""The scripted backend answers every recorded request exactly as it did when the file was written.

tests/agents/scripted_golden.json holds the real requests of the demo (built by runs.context in
the harness, rebuilt from the wire by the HTTP backends' loopback server, and the conversations
of tests/agents/test_scripted_*.py), each with the full response: text, tool calls with their ids
and arguments, usage, rationale and the planned steps. tests/agents/golden_capture.py says how the
file is written; rewrite it only when a change of the demo's answers is intended.
"""

import json

import pytest

from agents.backends.scripted import ScriptedBackend
from tests.agents.golden import read_golden, response_to_json

CASES = read_golden()


def test_the_golden_file_covers_the_demo():
    texts = {request.messages[0]["content"] for _, request, _ in CASES if isinstance(request.messages[0]["content"], str)}
    for question in ("How healthy is Acme Corp?", "Which accounts are most at risk of churning?", "List all accounts.",
                     "Summarise the open tickets for Globex.", "What is the usage trend for Umbrella?",
                     "What is 10% of Acme's ARR?", "What does our knowledge base say about renewals?",
                     "Send an email to dana.whitfield@example.com about the Acme renewal.",
                     "Delete the account Initech."):
        assert question in texts
    assert any("test_demo_flows" in test for test, _, _ in CASES)  # requests the harness built


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i}-{c[0].rsplit('::', 1)[-1][:60]}" for i, c in enumerate(CASES)])
def test_the_scripted_backend_answers_as_recorded(index):
    _, request, expected = CASES[index]
    response = ScriptedBackend({"backend": "scripted", "model": request.model}).complete(request)
    assert response_to_json(response) == expected
    assert json.dumps(response_to_json(response)) == json.dumps(expected)  # argument order too
