"""The one piece of agent work every framework does: a scripted model and the CRM tools.

The model asks for get_account, list_open_tickets and compute_health_score, one per turn, then
answers from the last result. Each framework gets a thin adapter over `next_step` and calls the
same tool handlers (Warrant's demo CRM, on the same database), so the frameworks differ only in
what they do around the model and the tools.
"""

import json

from agents.backends.base import ModelRequest, ModelResponse, ToolCall, Usage, tool_result_payload

PROMPT = "How healthy is Acme Corp?"
PLAN = (
    ("get_account", {"query": "Acme Corp"}),
    ("list_open_tickets", {"account_id": "A-100"}),
    ("compute_health_score", {"account_id": "A-100"}),
)
HANDLERS = {
    "get_account": "agents.tools.crm.get_account",
    "list_open_tickets": "agents.tools.crm.list_open_tickets",
    "compute_health_score": "agents.tools.crm.compute_health_score",
}
USAGE = (120, 20)  # fixed token counts: no framework pays for estimating them


def next_step(results: list) -> tuple[str, dict] | str:
    """The next tool call, given the tool results so far, or the final answer."""
    if len(results) < len(PLAN):
        return PLAN[len(results)]
    return final_answer(results[-1])


def final_answer(last) -> str:
    data = json.loads(last) if isinstance(last, str) else last
    data = data.get("data", data)  # Warrant's envelope, or the bare result
    return f"Acme Corp scores {data['score']}/100: {data['label']}."


def call_tool(name: str, arguments: dict):
    """The tool as the peers run it: the same handler, no gate around it."""
    from agents.tools.dispatcher import _handler
    from agents.tools.envelopes import ToolContext

    return _handler(HANDLERS[name])(arguments, ToolContext("bench", "operator"))


class WarrantScriptedModel:
    """Plugged into Warrant by dotted path, like any backend."""

    name = "bench-script"

    def __init__(self, profile: dict | None = None):
        self.profile = profile or {}

    def complete(self, request: ModelRequest) -> ModelResponse:
        results = [tool_result_payload(m["content"]) for m in request.messages if m["role"] == "tool"]
        step = next_step(results)
        usage = Usage(*USAGE, estimated=True)
        if isinstance(step, str):
            return ModelResponse(step, [], usage, request.model, self.name)
        name, arguments = step
        return ModelResponse("", [ToolCall(f"call_{len(results) + 1}", name, arguments)], usage, request.model, self.name)
