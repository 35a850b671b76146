"""The same agent in Pydantic AI: a FunctionModel that follows the script, plain tools.

Pydantic AI keeps no state of its own between runs. Its approval path is deferred tools: the run
ends with DeferredToolRequests, and a second run continues from the message history with the
approvals. The history is taken through JSON in between, as an application that waits for a
human (in another request, another process) has to.
"""

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from bench.script import PROMPT, USAGE, call_tool, next_step


def scripted(messages, info: AgentInfo) -> ModelResponse:
    results = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    step = next_step(results)
    usage = RequestUsage(input_tokens=USAGE[0], output_tokens=USAGE[1])
    if isinstance(step, str):
        return ModelResponse(parts=[TextPart(step)], usage=usage)
    name, arguments = step
    return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"call_{len(results) + 1}")], usage=usage)


def _agent(*, approval: bool) -> Agent:
    agent = Agent(FunctionModel(scripted), output_type=[str, DeferredToolRequests] if approval else str)

    @agent.tool_plain
    def get_account(query: str) -> dict:
        """Look an account up by name or id."""
        return call_tool("get_account", {"query": query})

    @agent.tool_plain
    def list_open_tickets(account_id: str) -> dict:
        """The open tickets of an account."""
        return call_tool("list_open_tickets", {"account_id": account_id})

    @agent.tool_plain(requires_approval=approval)
    def compute_health_score(account_id: str) -> dict:
        """The account's health score and label."""
        return call_tool("compute_health_score", {"account_id": account_id})

    return agent


class PydanticAIAgent:
    def __init__(self, *, approval: bool = False):
        self.agent = _agent(approval=approval)

    def run(self) -> str:
        return self.agent.run_sync(PROMPT).output

    def run_with_approval(self) -> str:
        first = self.agent.run_sync(PROMPT)
        assert isinstance(first.output, DeferredToolRequests), "the run did not ask for approval"
        stored = first.all_messages_json()  # what the application keeps while a human decides
        approvals = {call.tool_call_id: True for call in first.output.approvals}
        history = ModelMessagesTypeAdapter.validate_json(stored)
        return self.agent.run_sync(message_history=history,
                                   deferred_tool_results=DeferredToolResults(approvals=approvals)).output
