"""The `scripted` backend: a deterministic stand-in for a model, good enough to drive the demo.

It knows no tool by name. Each call reads the whole request afresh and keeps no state:

1. Steps: the backticked tool names in the prompt's playbook and skill sections (agents.prompt_format)
   that are on offer; with none, the tools whose name words the first user message says.
2. Orders: text in a user message or a successful tool result that tells it to call a tool
   (scripted_text). It obeys them first, once each, even for tools it was not shown, because a
   model can be fooled and the harness must be the one to stop it.
3. Arguments are filled by the tools' schema property names from the request and from earlier
   results (scripted_plan). A turn emits every call whose arguments are known now, plus the lookups
   the others wait for; a call already made (same name and arguments) is never made again.
4. With nothing left to call, it answers in plain text from the results, errors included, in the
   words the tools' vocabulary gives (scripted_vocabulary).

Pure: no ORM, no settings, no I/O. Token counts are estimates and say so.
"""

import json

from agents.backends.base import ModelRequest, ModelResponse, ToolCall, Usage, estimate_tokens
from agents.backends.scripted_plan import PastCall, Planner, call_key, inferred_steps, past_calls, scope_of
from agents.backends.scripted_text import find_orders, planned_steps, strip_orders, wording
from agents.prompt_format import LOAD_SKILL

CANNOT_HELP = "I can't help with that using the tools available to me."
_PERMISSION_CODES = frozenset({"not_permitted", "unknown_tool", "forbidden", "not_allowed"})


class ScriptedBackend:
    name = "scripted"

    def __init__(self, profile: dict | None = None):
        # Real backends take their configuration from the profile; this one has none, and takes it
        # only so every backend is built the same way.
        self.profile = dict(profile or {})

    def complete(self, request: ModelRequest) -> ModelResponse:
        turn = _Turn(request)
        calls = turn.next_calls()
        number = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
        tool_calls = [ToolCall(id=f"call_{number}_{index}", name=name, arguments=arguments)
                      for index, (name, arguments) in enumerate(calls, start=1)]
        names = list(dict.fromkeys(call.name for call in tool_calls))
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""
        text = f"Calling {listed}." if tool_calls else turn.answer()
        spoken = text + _dumps([[call.id, call.name, call.arguments] for call in tool_calls])
        usage = Usage(input_tokens=estimate_tokens(request.system + _dumps(request.messages) + _dumps(request.tools)),
                      output_tokens=estimate_tokens(spoken), estimated=True)
        return ModelResponse(text=text, tool_calls=tool_calls, usage=usage, model=request.model, backend=self.name,
                             rationale=text if tool_calls else "", raw={"steps": list(turn.steps)})


class _Turn:
    """Everything one request says, read once."""

    def __init__(self, request: ModelRequest):
        self.tools = {tool["name"]: tool for tool in request.tools}
        self.history: list[PastCall] = past_calls(request.messages)
        user_texts = [_text(m.get("content")) for m in request.messages if m.get("role") == "user"]
        request_text = user_texts[0] if user_texts else ""
        own = find_orders(request_text, self.tools)
        self.orders = own + [order for text in user_texts[1:] for order in find_orders(text, self.tools)]
        # Results are read only when they succeeded: an error message is the harness talking. A
        # loaded skill is a procedure the harness handed over; its steps arrive in the prompt.
        for call in self.history:
            if call.ok and call.name != LOAD_SKILL:
                self.orders.extend(order for text in _strings(call.data) for order in find_orders(text, self.tools))
        subject = strip_orders(request_text, own)
        self.steps = planned_steps(request.system, self.tools) or inferred_steps(subject, list(self.tools.values()))
        self.planner = Planner(self.tools, self.history, self.steps)
        listers = set(self.planner.listers.values())
        self.scope = scope_of(subject, full_text=request_text, fan_out=any(step in listers for step in self.steps))
        self.skipped: list[str] = []

    def next_calls(self) -> list[tuple[str, dict]]:
        seen = {call_key(call.name, call.arguments) for call in self.history}
        # A bare "call X" (no arguments, no target) is obeyed once.
        fills = [(order.tool, self.planner.fill_order(order, self.scope)) for order in self.orders
                 if order.arguments is not None or order.target is not None or not self.planner.made(order.tool)]
        fills += [(step, self.planner.fill_step(step, self.scope)) for step in self.steps]
        batch = []
        for tool, fill in fills:
            if fill.status == "skip":
                self.skipped.append(fill.reason)
            for name, arguments in ([(tool, a) for a in fill.values] if fill.status == "ready" else fill.needs):
                if call_key(name, arguments) not in seen:
                    seen.add(call_key(name, arguments))
                    batch.append((name, arguments))
        return batch

    # --- The answer ---------------------------------------------------------------------------

    def label(self, record_id: str) -> str:
        return self.planner.label(record_id)

    def describe(self, expression: str) -> str | None:
        """What an expression we built means ("10% of Acme Corp's ARR (240000)"), if we built it."""
        fill = self.planner.calculation(self.scope)
        return fill.description if fill.status == "ready" and fill.values and fill.values[0] == expression else None

    def answer(self) -> str:
        answered = [call for call in self.history if call.envelope is not None]
        if not answered:
            if self.skipped and (self.steps or self.orders):
                return f"I could not do that: {self.skipped[0]}."
            return CANNOT_HELP if not self.history else "The tools have not answered yet, so I have nothing to report."
        words = wording()
        lookups = self.planner.lookups()  # they speak only when nothing else was asked
        asked_more = any(call.name not in lookups for call in answered)
        blocks = []
        for tool, summary in words.summaries.items():
            done = [call for call in answered if call.ok and call.name == tool]
            if done:
                blocks.append(summary(done, self))
        for call in answered:
            if call.ok and call.name not in words.summaries and not (call.name in lookups and asked_more):
                phrase = words.answers.get(call.name)
                blocks.append(phrase(call, self) if phrase else f"{call.name} returned: {_dumps(call.data)[:500]}")
        blocks += [_error(call) for call in answered if not call.ok]
        return "\n\n".join(dict.fromkeys(block for block in blocks if block))


def _consequence(tool: str) -> str:
    verb = tool.split("_", 1)[0].lower()
    return {"send": "nothing was sent", "delete": "nothing was deleted", "remove": "nothing was deleted"}.get(
        verb, "it did not run")


def _error(call: PastCall) -> str:
    envelope = call.envelope or {}
    code = str(envelope.get("code") or "error")
    details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
    reason = details.get("reason") or envelope.get("reason")
    if reason:  # as a sentence
        reason = str(reason).strip() + ("" if str(reason).strip().endswith((".", "!", "?")) else ".")
    # "expired" as its own code: calls recorded before an expiry was told as a denial.
    if code == "expired" or (code == "denied" and details.get("decision") == "expired"):
        line = f"The approval request for {call.name} expired before anyone decided, so {_consequence(call.name)}."
        return line + (f" {reason}" if reason else "")
    if code == "denied":
        line = f"The call to {call.name} was denied by an approver, so {_consequence(call.name)}."
        return line + (f" The approver's reason: {reason}" if reason else "")
    if code in _PERMISSION_CODES:
        return f"I am not permitted to use {call.name}."
    return f"{call.name} failed: {envelope.get('error') or code}"


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
