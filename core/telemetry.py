"""Trace spans of a run, after the OpenTelemetry GenAI semantic conventions.

`invoke_agent {agent}` for each slice a worker advances a run, `chat {model}` for each model call
(its chain of retries and fallbacks included), `execute_tool {tool}` for each tool call; gen_ai.*
attributes as the conventions name them, warrant.* for what governance decided.

Off unless warrant.telemetry.setup() found OTEL_EXPORTER_OTLP_ENDPOINT and called enable(): then
every hook here returns at its first line, and nothing of the SDK is imported. Here, in core, so
that runs/ and agents/ can call it without importing the project package.

One run, one trace, however many workers and approvals it takes: the trace id and the id of the
run's root span are derived from the run's id (run_trace_ids), and every slice's span is a child
of that root. The first slice is that root; a slice resumed after an
approval, or on another worker, continues under it, and links to the request or task that woke it.
"""

import hashlib
import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar

from core import logctx

_tracer = None  # set by enable(); None: tracing is off
_root_sampled = None  # trace id -> whether the sampler keeps that trace's root (set by enable())
# (trace id, span id) the id generator hands out for the next span: how the run's root span gets
# the ids every later slice derives (warrant.telemetry.RunIdGenerator reads it).
forced_ids: ContextVar[tuple[int, int] | None] = ContextVar("warrant_forced_span_ids", default=None)

TERMINAL = {"succeeded", "failed", "blocked", "stopped", "cancelled"}
slice_log = logging.getLogger("runs.slice")


def enable(tracer, root_sampled=None) -> None:
    """`root_sampled(trace_id)`: the sampler's decision for a root span of that trace, so a later
    slice is kept exactly when its run's root was (a ratio sampler decides by trace id)."""
    global _tracer, _root_sampled
    _tracer, _root_sampled = tracer, root_sampled


def enabled() -> bool:
    return _tracer is not None


def run_trace_ids(run_id) -> tuple[int, int]:
    """(trace id, root span id) of a run, from its id alone: any process finds the same ones.

    A digest of the id, not the UUID itself: a UUID's version and variant bits are fixed, and a
    ratio sampler reads the trace id's low 64 bits (where the variant sits) as uniformly random."""
    digest = hashlib.sha256(f"warrant-run-trace:{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def current_ids() -> tuple[str, str]:
    """(trace id, span id) of the current span in hex, for log lines; empty when off."""
    if _tracer is None:
        return "", ""
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return "", ""
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def annotate_current(attributes: dict) -> None:
    if _tracer is None:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(attributes)


class _Off:
    """What a hook yields when tracing is off: every method does nothing."""

    def __getattr__(self, name):
        return _nothing


def _nothing(*args, **kwargs):
    return args[0] if args else None


OFF = _Off()


@contextmanager
def run_span(run):
    """Around one slice of run_advance: the log lines inside name the run and its caller, and,
    when tracing, an `invoke_agent` span holds the slice's model and tool calls."""
    snapshot = run.snapshot or {}
    caller = (snapshot.get("caller") or {}).get("username", "")
    with logctx.run_context(str(run.id), user_name=caller):
        if _tracer is None:
            handle = Slice(run)
            try:
                yield handle
            finally:
                handle.log()
            return
        with _slice_span(run, snapshot) as handle:
            yield handle


@contextmanager
def _slice_span(run, snapshot: dict):
    from opentelemetry import trace
    from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags

    agent = snapshot.get("agent") or {}
    profile = agent.get("model_profile") or {}
    trace_id, root_id = run_trace_ids(run.id)
    woke_by = trace.get_current_span().get_span_context()
    links = [Link(woke_by)] if woke_by.is_valid else []
    first = run.step == 0 and (run.state or {}).get("phase", "start") == "start"
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": profile.get("backend", ""),
        "gen_ai.agent.name": agent.get("name") or agent.get("slug", ""),
        "gen_ai.agent.id": agent.get("slug", ""),
        "gen_ai.agent.version": str(agent.get("version", "")),
        "gen_ai.conversation.id": str(run.id),
        "gen_ai.request.model": profile.get("model", ""),
        "warrant.run.id": str(run.id),
        "warrant.run.step": run.step,
        "warrant.run.delivery": run.deliveries,
        "warrant.run.resumed": not first,
    }
    name = f"invoke_agent {attributes['gen_ai.agent.name']}"
    if first:  # the run's root span: its ids are the ones every later slice derives
        token = forced_ids.set((trace_id, root_id))
        parent = trace.set_span_in_context(trace.INVALID_SPAN)
    else:
        token = None
        sampled = _root_sampled(trace_id) if _root_sampled is not None else True
        root = SpanContext(trace_id=trace_id, span_id=root_id, is_remote=True,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT))
        parent = trace.set_span_in_context(NonRecordingSpan(root))
    try:
        span = _tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes, links=links)
    finally:
        if token is not None:
            forced_ids.reset(token)
    handle = SliceSpan(span, run)
    with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
        try:
            yield handle
        finally:
            handle.log()


class Slice:
    """One slice of a run as run_advance reports it (step() after each checkpoint); its log line at the end."""

    def __init__(self, run):
        self.run, self.first_step = run, run.step

    def step(self, result, run) -> None:
        if run is not None:
            self.run = run

    def log(self) -> None:
        """One line per slice: which steps it took and where the run is now."""
        slice_log.info("run %s advanced from step %s to %s: %s", self.run.id, self.first_step, self.run.step,
                       self.run.status)


class SliceSpan(Slice):
    """What a slice's span learns from each checkpoint."""

    def __init__(self, span, run):
        super().__init__(run)
        self.span = span

    def step(self, result, run) -> None:
        """After run_checkpoint: the step's governance events and, once known, the run's outcome."""
        span = self.span
        for kind, data in getattr(result, "events", None) or ():
            data = data or {}
            if kind == "policy_decision":
                span.add_event("warrant.policy_decision", _clean({
                    "warrant.policy.name": data.get("policy") or data.get("name"),
                    "warrant.policy.id": data.get("policy_id") or data.get("id"),
                    "warrant.policy.type": data.get("type"),
                    "warrant.policy.effect": data.get("effect")}))
            elif kind == "tainted":
                span.set_attribute("warrant.run.tainted", True)
                span.add_event("warrant.taint", _clean({"warrant.taint.origin": data.get("origin"),
                                                        "warrant.taint.patterns": [str(p) for p in data.get("patterns") or []]}))
            elif kind == "tool_refused":
                span.add_event("warrant.tool_refused", _clean({"gen_ai.tool.name": data.get("tool"),
                                                               "gen_ai.tool.call.id": data.get("call_id"),
                                                               "warrant.refusal.code": data.get("code")}))
            elif kind == "tool_call" and data.get("approval_id"):
                self._approval(data["approval_id"])
        outcome = getattr(result, "outcome", None)
        if outcome is not None and type(outcome).__name__ == "Park":
            span.add_event("warrant.approval_requested", _clean({
                "gen_ai.tool.name": outcome.tool, "gen_ai.tool.call.id": outcome.call_id,
                "warrant.approval.role": outcome.approver_role,
                "warrant.approval.reasons": [str(r) for r in outcome.reasons or []]}))
        if run is not None:
            self.run = run
            self._budgets(run)

    def _approval(self, approval_id: str) -> None:
        """The decision an executed or denied call rests on: role, decision, time waited."""
        approval = (self.run.approvals.filter(id=approval_id).select_related("approver_role")
                    .only("status", "created_at", "decided_at", "approver_role__name").first())
        if approval is None:
            return
        waited = (approval.decided_at - approval.created_at).total_seconds() if approval.decided_at else None
        self.span.add_event("warrant.approval", _clean({
            "warrant.approval.id": str(approval_id), "warrant.approval.role": approval.approver_role.name,
            "warrant.approval.decision": approval.status, "warrant.approval.waited_seconds": waited}))

    def _budgets(self, run) -> None:
        agent = (run.snapshot or {}).get("agent") or {}
        status = str(run.status)
        self.span.set_attributes(_clean({
            "warrant.run.status": status,
            "warrant.run.tainted": bool(run.tainted),
            "warrant.budget.tokens.used": (run.input_tokens or 0) + (run.output_tokens or 0),
            "warrant.budget.tokens.max": agent.get("max_tokens"),
            "warrant.budget.turns.used": run.llm_calls,
            "warrant.budget.turns.max": agent.get("max_turns"),
            "warrant.budget.tool_calls.used": run.tool_calls,
            "warrant.budget.tool_calls.max": agent.get("max_tool_calls"),
            "gen_ai.usage.input_tokens": run.input_tokens,
            "gen_ai.usage.output_tokens": run.output_tokens,
        }))
        if status in TERMINAL:
            self.span.set_attributes(_clean({"warrant.run.final_status": status,
                                             "warrant.run.stop_reason": run.stop_reason or None,
                                             "warrant.run.error": run.error or None}))


@contextmanager
def chat_span(request, chain: list[dict]):
    """Around one model call through its profile chain: `chat {model}`."""
    if _tracer is None:
        yield OFF
        return
    from opentelemetry.trace import SpanKind

    first = chain[0] if chain else {}
    model = getattr(request, "model", "") or first.get("model", "")
    attributes = _clean({
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": first.get("backend"),
        "gen_ai.request.model": model, "gen_ai.request.max_tokens": first.get("max_tokens"),
        "gen_ai.request.temperature": first.get("temperature"),
        "warrant.model.profile": first.get("name"),
        "warrant.model.chain": [p.get("name", "") for p in chain],
        "warrant.model.tools_shown": len(getattr(request, "tools", None) or ()),
    })
    with _tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes,
                                       record_exception=True, set_status_on_exception=True) as span:
        yield ChatSpan(span, first)


class ChatSpan:
    def __init__(self, span, requested: dict):
        self.span, self.requested = span, requested

    def attempts(self, attempts) -> None:
        for attempt in attempts or ():
            self.span.add_event("warrant.model.attempt", _clean({
                "warrant.model.profile": attempt.get("profile"), "gen_ai.provider.name": attempt.get("backend"),
                "warrant.model.attempt": attempt.get("attempt"), "warrant.model.outcome": attempt.get("outcome"),
                "warrant.model.latency_ms": attempt.get("latency_ms"), "error.type": attempt.get("kind")}))

    def response(self, response) -> None:
        usage = response.usage
        fallback = bool(response.profile) and response.profile != self.requested.get("name")
        self.span.set_attributes(_clean({
            "gen_ai.response.model": response.model, "gen_ai.provider.name": response.backend,
            "gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": ["tool_calls" if response.tool_calls else "stop"],
            "warrant.model.answered_by": response.profile, "warrant.model.fallback": fallback,
            "warrant.usage.estimated": bool(usage.estimated),
        }))
        self.attempts(response.attempts)

    def failed(self, exc) -> None:
        self.span.set_attribute("error.type", type(exc).__name__)
        self.attempts(getattr(exc, "attempts", ()))


@contextmanager
def tool_span(call: dict, tool: dict, *, side_effect: bool = False, approval_id: str | None = None):
    """Around one tool call as the run executes it: `execute_tool {tool}`."""
    if _tracer is None:
        yield OFF
        return
    from opentelemetry.trace import SpanKind

    name = call.get("name") or tool.get("name", "")
    attributes = _clean({
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call.get("id"),
        "gen_ai.tool.type": "function", "gen_ai.tool.description": (tool.get("description") or "")[:200] or None,
        "warrant.tool.source": tool.get("source"), "warrant.tool.side_effect": bool(side_effect),
        "warrant.tool.trusted": bool(tool.get("trusted", False)), "warrant.approval.id": approval_id,
    })
    with _tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes,
                                       record_exception=True, set_status_on_exception=True) as span:
        yield ToolSpan(span, time.monotonic())


class ToolSpan:
    def __init__(self, span, began: float):
        self.span, self.began = span, began

    def done(self, envelope: dict) -> dict:
        """Record the envelope's outcome; hands the envelope back (`return span.done(dispatch(...))`)."""
        ok = bool(isinstance(envelope, dict) and envelope.get("ok"))
        self.span.set_attribute("warrant.tool.ok", ok)
        if not ok and isinstance(envelope, dict):
            self.span.set_attribute("error.type", str(envelope.get("code") or "tool_error"))
        return envelope


def _clean(attributes: dict) -> dict:
    """OpenTelemetry takes str, bool, int, float and lists of one of them; None means unset."""
    out = {}
    for key, value in attributes.items():
        if value is None or value == "":
            continue
        if isinstance(value, (str, bool, int, float)):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        else:
            out[key] = str(value)
    return out
