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
