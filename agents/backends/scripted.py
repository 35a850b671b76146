"""The `scripted` backend: a deterministic stand-in for a model, good enough to drive the demo.

It knows no tool by name and keeps no state: each call reads the whole request afresh and makes
the calls its plan (scripted_plan.Plan) says are ready; with none left it answers from the results,
errors included, in the words of the tools' wording modules (scripted_text.WORDING_MODULES). It
obeys orders in the user's messages and in tool results on purpose: a model can be fooled, and
the harness must be the one to stop it.

Pure: no ORM, no settings, no I/O. Token counts are estimates and say so.
"""

from agents.backends.base import ModelRequest, ModelResponse, ToolCall, Usage, estimate_tokens
from agents.backends.scripted_plan import PastCall, Plan, dumps
from agents.backends.scripted_text import wording

CANNOT_HELP = "I can't help with that using the tools available to me."
_UNDONE = {"send": "nothing was sent", "delete": "nothing was deleted", "remove": "nothing was deleted"}
# How an answer tells a call the harness refused, by the error's code: the line, and how a reason follows it.
_REFUSED = {
    "expired": ("The approval request for {tool} expired before anyone decided, so {undone}.", " {reason}"),
    "denied": ("The call to {tool} was denied by an approver, so {undone}.", " The approver's reason: {reason}"),
    **dict.fromkeys(("not_permitted", "unknown_tool", "forbidden", "not_allowed"),
                    ("I am not permitted to use {tool}.", "")),
}


class ScriptedBackend:
    name = "scripted"

    def __init__(self, profile: dict | None = None):
        # Real backends take their configuration from the profile; this one has none, and takes it
        # only so every backend is built the same way.
        self.profile = dict(profile or {})

    def complete(self, request: ModelRequest) -> ModelResponse:
        plan = Plan(request)
        number = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
        tool_calls = [ToolCall(id=f"call_{number}_{index}", name=name, arguments=arguments)
                      for index, (name, arguments) in enumerate(plan.next_calls(), start=1)]
        names = list(dict.fromkeys(call.name for call in tool_calls))
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""
        text = f"Calling {listed}." if tool_calls else answer(plan)
        spoken = text + dumps([[call.id, call.name, call.arguments] for call in tool_calls])
        usage = Usage(input_tokens=estimate_tokens(request.system + dumps(request.messages) + dumps(request.tools)),
                      output_tokens=estimate_tokens(spoken), estimated=True)
        return ModelResponse(text=text, tool_calls=tool_calls, usage=usage, model=request.model, backend=self.name,
                             rationale=text if tool_calls else "", raw={"steps": list(plan.steps)})


def answer(plan: Plan) -> str:
    """The final answer: each tool's results in its wording (or as JSON), then the errors. The
    lookups (resolvers, listers) speak only when nothing else was asked."""
    answered = [call for call in plan.history if call.envelope is not None]
    if not answered:
        if plan.skipped:
            return f"I could not do that: {plan.skipped[0]}."
        return CANNOT_HELP if not plan.history else "The tools have not answered yet, so I have nothing to report."
    words, lookups = wording(), plan.lookups()
    asked_more = any(call.name not in lookups for call in answered)
    done = [call for call in answered if call.ok]
    blocks = [summary(calls, plan) for tool, summary in words.summaries.items()
              if (calls := [call for call in done if call.name == tool])]
    for call in done:
        if call.name not in words.summaries and not (call.name in lookups and asked_more):
            phrase = words.answers.get(call.name)
            blocks.append(phrase(call, plan) if phrase else f"{call.name} returned: {dumps(call.data)[:500]}")
    blocks += [_error(call) for call in answered if not call.ok]
    return "\n\n".join(dict.fromkeys(block for block in blocks if block))


def _error(call: PastCall) -> str:
    envelope = call.envelope or {}
    code = str(envelope.get("code") or "error")
    details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
    if code == "denied" and details.get("decision") == "expired":  # an expiry; older recordings say "expired"
        code = "expired"
    if code not in _REFUSED:
        return f"{call.name} failed: {envelope.get('error') or code}"
    reason = str(details.get("reason") or envelope.get("reason") or "").strip()
    reason += "" if not reason or reason.endswith((".", "!", "?")) else "."  # as a sentence
    line, then = _REFUSED[code]
    undone = _UNDONE.get(call.name.split("_", 1)[0].lower(), "it did not run")
    return line.format(tool=call.name, undone=undone) + (then.format(reason=reason) if reason else "")
