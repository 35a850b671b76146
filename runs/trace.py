"""A run's trace as a hash chain (evidence format v2): each event's hash covers the one before it,
and the receipt signs the last one, so an event edited, blanked or removed after sealing shows.

The hash is computed over the data as stored, with warrant_verify's own functions: the offline
verifier recomputes exactly these bytes from events.jsonl.
"""

import json

from runs.models import RunEvent
from warrant_verify.jcs import CanonicalizationError
from warrant_verify.messages import GENESIS, event_hash

__all__ = ["GENESIS", "chain_event", "trace_of"]


def chain_event(*, prev: str, seq: int, step: int, kind: str, data) -> tuple[str, object]:
    """(hash, data to store) of one event chained to `prev`.

    Data JSON holds but RFC 8785 cannot (a non-string key, an integer past 2**53, NaN, a lone
    surrogate) is stored as its JSON text instead, so the trace stays verifiable everywhere."""
    try:
        return event_hash(prev=prev, seq=seq, step=step, kind=kind, data=data), data
    except CanonicalizationError:
        pass
    try:
        # What the JSON column would have made of it (string keys, lists for tuples).
        data = json.loads(json.dumps(data))
        return event_hash(prev=prev, seq=seq, step=step, kind=kind, data=data), data
    except (CanonicalizationError, TypeError, ValueError):
        data = {"unrepresentable_json": json.dumps(data, default=repr, ensure_ascii=True)}
        return event_hash(prev=prev, seq=seq, step=step, kind=kind, data=data), data


def trace_of(run_id) -> list[tuple[int, int, str, object, str]]:
    """(seq, step, kind, data, hash) of a run's events in seq order, as the database holds them."""
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "step", "kind", "data", "hash")
    return list(rows)


def trace_head_of(run) -> tuple[int, str]:
    """(events, head) of the run's trace, as sealed into its receipt: the last event's seq and hash.

    Known without a read when this process's last committed write of the run was the last event."""
    known = getattr(run, "trace_head", None)
    if known is not None and known[0] == run.event_seq:
        return known
    row = RunEvent.objects.filter(run_id=run.id).order_by("-seq").values_list("seq", "hash").first()
    return (row[0], row[1]) if row else (0, GENESIS)
