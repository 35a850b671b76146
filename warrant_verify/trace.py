"""A run's trace: its events, each hash-chained to the one before it, against the receipt's trace."""

from . import jcs
from .messages import GENESIS, event_hash
from .shapes import Failure, is_hex64, is_int


def trace_summary(events, *, where: str, file: str = "events.jsonl") -> tuple[list[Failure], int, str | None]:
    """(failures, count, head) of a run's events (any order) by themselves: each numbered in turn
    and its stored hash chaining from the one before it; the head recomputed from the events'
    content alone (stored hashes are not trusted), None when an event cannot be canonicalized."""
    failures: list[Failure] = []
    ordered = sorted(events, key=lambda event: event.get("seq") if is_int(event.get("seq")) else -1)
    prev, stored_held = GENESIS, True
    for number, event in enumerate(ordered, start=1):
        seq = event.get("seq")
        if seq != number:
            failures.append(Failure(file, f"{where} event {seq}", f"event seq {seq} where {number} was expected: "
                                    "an event is missing, duplicated or renumbered"))
        try:
            computed = event_hash(prev=prev, seq=seq, step=event.get("step"), kind=event.get("kind"),
                                  data=event.get("data"))
        except (jcs.CanonicalizationError, UnicodeEncodeError, AttributeError) as exc:
            computed = None
            failures.append(Failure(file, f"{where} event {seq}", f"event cannot be canonicalized ({exc})"))
        if computed is None or computed != event.get("hash"):
            stored_held = False
            if computed is not None:
                failures.append(Failure(file, f"{where} event {seq}", "hash does not chain from the event before "
                                        "it: the event was edited, blanked or the one before it removed"))
        prev = event.get("hash") if is_hex64(event.get("hash")) else (computed or prev)
    # While every stored hash is the one computed, the chain walked is the content's own: its end
    # is the head, and the events need not be hashed a second time.
    return failures, len(ordered), prev if stored_held else _trace_head(ordered)


def verify_trace(events, *, body: dict, file: str = "events.jsonl") -> list[Failure]:
    """A run's events (events.jsonl lines, any order) against their hashes and the receipt's body.trace."""
    run_id = body.get("run_id") if isinstance(body, dict) else None
    trace = body.get("trace") if isinstance(body, dict) else None
    where = f"run {run_id}"
    failures, count, head = trace_summary(events, where=where, file=file)
    if not isinstance(trace, dict):
        failures.append(Failure(file, where, "the receipt's body has no trace to check the events against"))
        return failures
    if trace.get("events") != count:
        failures.append(Failure(file, where, f"{count} events in the bundle, the receipt sealed {trace.get('events')!r}"))
    if head != trace.get("head"):
        failures.append(Failure(file, where, "the events do not hash to the trace head sealed in the receipt"))
    return failures


def _trace_head(ordered: list) -> str | None:
    """The head recomputed from the events' content alone (stored hashes are not trusted)."""
    head = GENESIS
    for event in ordered:
        try:
            head = event_hash(prev=head, seq=event.get("seq"), step=event.get("step"), kind=event.get("kind"),
                              data=event.get("data"))
        except (jcs.CanonicalizationError, UnicodeEncodeError, AttributeError):
            return None
    return head
