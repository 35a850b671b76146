"""Test doubles that plug in through the real extension points (dotted paths), not mocks.

ReplayBackend is a model that follows a script given as the run's input, so a test can make
the "model" do exactly what a misbehaving one would: repeat calls, ask for odd arguments.
"""

import json

from agents.backends.base import ModelRequest, ModelResponse, ToolCall, Usage
from agents.tools.envelopes import ToolContext


class ReplayBackend:
    name = "replay"

    def __init__(self, profile: dict | None = None):
        self.profile = profile or {}

    def complete(self, request: ModelRequest) -> ModelResponse:
        script = json.loads(request.messages[0]["content"])
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        turns = script.get("turns", [])
        if turn < len(turns):
            calls = [ToolCall(id="same-id-every-time", name=c["name"], arguments=c["arguments"]) for c in turns[turn]]
            return ModelResponse("", calls, Usage(10, 5, estimated=True), request.model, self.name)
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        return ModelResponse(script.get("final", "done") + " " + " | ".join(results), [], Usage(10, 5, True),
                             request.model, self.name)


def cancel_own_run(args: dict, ctx: ToolContext) -> dict:
    """A tool during whose execution the run's owner presses cancel."""
    from runs.models import Run

    Run.objects.filter(id=ctx.run_id).update(cancel_requested=True)
    return {"looked_up": True}


def cancel_through_the_service(args: dict, ctx: ToolContext) -> dict:
    """A tool during whose execution the run's owner cancels it the way the API does, which
    writes a `cancel_requested` event while the worker is in the middle of its step."""
    from django.contrib.auth.models import User

    from runs.models import Run
    from runs.services import run_cancel

    run_cancel(run=Run.objects.get(id=ctx.run_id), user=User.objects.get(username=ctx.caller))
    return {"looked_up": True}
