"""The `scripted` backend: a deterministic stand-in for a model, good enough to drive the demo.

Each call reads the whole request afresh, so it keeps no state between turns:

1. Steps: the backticked tool names in the system prompt's "## Playbook: …" and "## Skill: …"
   sections, in order, that are among the tools on offer. With none, the tools whose name words
   appear in the first user message (see `scripted_plan.inferred_steps`).
2. Orders: text in a user message or a tool result that tells it to call a tool (see
   `scripted_orders`). It obeys them first, once each, even for tools it was not shown, because
   a model can be fooled and the harness must be the one to stop it.
3. Arguments come from the request (account names and ids, addresses, topics, arithmetic) and from
   earlier results (get_account / list_accounts turn a name into an id or a number). A turn emits
   every call whose arguments are known now, plus the lookups the others wait for; a call already
   made (same name and arguments) is never made again.
4. With nothing left to call, it answers in plain text from the results, errors included.

Pure: no ORM, no settings, no I/O. Token counts are estimates and say so.
"""

import json

from agents.backends import scripted_plan as plan_rules
from agents.backends.base import ModelRequest, ModelResponse, ToolCall, Usage, estimate_tokens
from agents.backends.scripted_answer import compose
from agents.backends.scripted_history import LISTER, Knowledge, PastCall, call_key, past_calls
from agents.backends.scripted_orders import Order, find_orders, strip_orders
from agents.backends.scripted_text import planned_steps, signature

LOAD_SKILL = "load_skill"


class ScriptedBackend:
    name = "scripted"

    def __init__(self, profile: dict | None = None):
        # A model profile configures real backends (base_url, keys, timeouts); this one has nothing to
        # configure, and takes the profile only so every backend is built the same way.
        self.profile = dict(profile or {})

    def complete(self, request: ModelRequest) -> ModelResponse:
        turn = _Turn(request)
        calls = turn.next_calls()
        if calls:
            number = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
            tool_calls = [
                ToolCall(id=f"call_{number}_{index}", name=name, arguments=arguments)
                for index, (name, arguments) in enumerate(calls, start=1)
            ]
            text = _rationale(tool_calls)
        else:
            tool_calls = []
            text = turn.answer()
        spoken = text + _dumps([[call.id, call.name, call.arguments] for call in tool_calls])
        return ModelResponse(
            text=text,
            tool_calls=tool_calls,
            usage=Usage(
                input_tokens=estimate_tokens(
                    request.system + _dumps(request.messages) + _dumps(request.tools)
                ),
                output_tokens=estimate_tokens(spoken),
                estimated=True,
            ),
            model=request.model,
            backend=self.name,
            rationale=text if tool_calls else "",
            raw={"steps": list(turn.steps)},
        )


class _Turn:
    """Everything one request says, read once."""

    def __init__(self, request: ModelRequest):
        self.tools = {tool["name"]: tool for tool in request.tools}
        self.tool_names = list(self.tools)
        self.history: list[PastCall] = past_calls(request.messages)
        self.knowledge = Knowledge(self.history)

        user_texts = [_text(m.get("content")) for m in request.messages if m.get("role") == "user"]
        self.request_text = user_texts[0] if user_texts else ""
        own_orders = find_orders(self.request_text, self.tool_names)
        self.orders: list[Order] = own_orders + [
            order for text in user_texts[1:] for order in find_orders(text, self.tool_names)
        ]
        # Results are read only when they succeeded: an error message is the harness talking. A
        # loaded skill is a procedure the harness handed over; its steps arrive in the prompt.
        for call in self.history:
            if call.ok and call.name != LOAD_SKILL:
                for text in _strings(call.data):
                    self.orders.extend(find_orders(text, self.tool_names))

        subject = strip_orders(self.request_text, own_orders)
        self.steps = planned_steps(request.system, self.tool_names) or plan_rules.inferred_steps(
            subject, self.tool_names
        )
        email_tool = self.tools.get("send_email") or {}
        self.scope = plan_rules.scope_of(
            subject,
            full_text=self.request_text,
            fan_out=LISTER in self.steps,
            signature=signature(str(email_tool.get("description") or "")),
        )
        self.skipped: list[str] = []

    def next_calls(self) -> list[tuple[str, dict]]:
        seen = {call_key(call.name, call.arguments) for call in self.history}
        batch: list[tuple[str, dict]] = []

        def add(name: str, arguments: dict) -> None:
            key = call_key(name, arguments)
            if key not in seen:
                seen.add(key)
                batch.append((name, arguments))

        fills = []
        for order in self.orders:
            if order.arguments is None and order.target is None and self.knowledge.made(order.tool):
                continue  # a bare "call X" is obeyed once
            fills.append(
                (order.tool, plan_rules.fill_order(order, self.scope, self.knowledge, self.tools, self.steps))
            )
        for step in self.steps:
            schema = self.tools[step].get("input_schema") or {}
            fills.append(
                (
                    step,
                    plan_rules.fill_step(
                        step, schema, self.scope, self.knowledge, self.tool_names, self.steps
                    ),
                )
            )
        for tool, fill in fills:
            if fill.status == "ready":
                for arguments in fill.values:
                    add(tool, arguments)
            elif fill.status == "wait":
                for name, arguments in fill.needs:
                    add(name, arguments)
            else:
                self.skipped.append(fill.reason)
        return batch

    def answer(self) -> str:
        skipped = self.skipped if (self.steps or self.orders) else []
        return compose(self.history, self.knowledge, describe_calculation=self.describe, skipped=skipped)

    def describe(self, expression: str) -> str | None:
        """What an expression we built means ("10% of Acme Corp's ARR (240000)"), if we built it."""
        fill = plan_rules.calculation(self.scope, self.knowledge, self.tool_names, self.steps)
        if fill.status == "ready" and fill.values and fill.values[0] == expression:
            return fill.description
        return None


def _rationale(calls: list[ToolCall]) -> str:
    names = list(dict.fromkeys(call.name for call in calls))
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"Calling {listed}."


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some clients send them
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
