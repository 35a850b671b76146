"""Tools for fault scenarios, registered through the tool registry like any other."""

import os
import signal
import time

from agents.tools.envelopes import ToolContext


def slow_echo(args: dict, ctx: ToolContext) -> dict:
    """Holds the step open long enough for a test to break something under it."""
    time.sleep(float(args.get("seconds", 1)))
    return {"echo": args.get("text", "")}


def poison(args: dict, ctx: ToolContext) -> dict:
    """Kills the process running it, every time: a step no worker survives."""
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


class ThinkingBackend:
    """The replay model (tests.runs.backends), slow to answer: the script's "think" maps a turn
    (as a string) to the seconds the call takes, so a worker can be killed in the middle of it."""

    name = "thinking"

    def __init__(self, profile: dict | None = None):
        from tests.runs.backends import ReplayBackend

        self._replay = ReplayBackend(profile)

    def complete(self, request):
        import json

        script = json.loads(request.messages[0]["content"])
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        time.sleep(float(script.get("think", {}).get(str(turn), 0)))
        return self._replay.complete(request)
