"""The same agent in LangGraph: a chat model that follows the script, a ToolNode, a SqliteSaver.

Checkpoints are written with durability="sync" (each one on disk before the next step starts),
the closest LangGraph comes to Warrant's per-step checkpoint. The approval variant asks for it
with interrupt() inside compute_health_score and resumes with Command(resume=...).
"""

import json
import sqlite3
import uuid
from pathlib import Path

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from bench.script import PROMPT, USAGE, call_tool, next_step


class ScriptedChatModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        results = [m.content for m in messages if isinstance(m, ToolMessage)]
        step = next_step(results)
        usage = {"input_tokens": USAGE[0], "output_tokens": USAGE[1], "total_tokens": sum(USAGE)}
        if isinstance(step, str):
            message = AIMessage(content=step, usage_metadata=usage)
        else:
            name, arguments = step
            message = AIMessage(content="", usage_metadata=usage, tool_calls=[
                {"name": name, "args": arguments, "id": f"call_{len(results) + 1}", "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


@tool
def get_account(query: str) -> str:
    """Look an account up by name or id."""
    return json.dumps(call_tool("get_account", {"query": query}))


@tool
def list_open_tickets(account_id: str) -> str:
    """The open tickets of an account."""
    return json.dumps(call_tool("list_open_tickets", {"account_id": account_id}))


@tool
def compute_health_score(account_id: str) -> str:
    """The account's health score and label."""
    return json.dumps(call_tool("compute_health_score", {"account_id": account_id}))


@tool("compute_health_score")
def compute_health_score_approved(account_id: str) -> str:
    """The account's health score and label (a human approves each call)."""
    decision = interrupt({"tool": "compute_health_score", "args": {"account_id": account_id}})
    if not decision.get("approved"):
        return json.dumps({"ok": False, "code": "denied"})
    return json.dumps(call_tool("compute_health_score", {"account_id": account_id}))


class LangGraphAgent:
    def __init__(self, path: Path, *, approval: bool = False):
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        tools = [get_account, list_open_tickets, compute_health_score_approved if approval else compute_health_score]
        model = ScriptedChatModel().bind_tools(tools)

        def agent(state: MessagesState) -> dict:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
        graph.add_edge("tools", "agent")
        self.graph = graph.compile(checkpointer=SqliteSaver(self.conn))

    def run(self) -> str:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        state = self.graph.invoke({"messages": [HumanMessage(PROMPT)]}, config, durability="sync")
        return state["messages"][-1].content

    def run_with_approval(self) -> str:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        state = self.graph.invoke({"messages": [HumanMessage(PROMPT)]}, config, durability="sync")
        assert state.get("__interrupt__"), "the run did not pause for approval"
        state = self.graph.invoke(Command(resume={"approved": True}), config, durability="sync")
        return state["messages"][-1].content

    def close(self) -> None:
        self.conn.close()
