"""The trace writer: a run's events, numbered, redacted and hash-chained, written in one statement.

Sequence numbers come from Run.event_seq. Whoever writes events moves event_seq on by their count
in the same compare-and-set that changes the run (runs.lifecycle), so the numbers are reserved
under the row's lock, roll back with it, and never repeat or leave a gap.
"""

from functools import partial

from django.conf import settings
from django.db import transaction

from governance import redaction
from runs.models import Run, RunEvent
from runs.trace import GENESIS, chain_event

Event = tuple[int, str, dict]  # (step, kind, data)


def write_events(run: Run, first_seq: int, events: list[Event]) -> tuple[int, str]:
    """Insert `events` numbered from `first_seq` (reserved by the caller), each chained to the one
    before it; the new head, (seq, hash). Inside the transaction that reserved the numbers."""
    assert transaction.get_connection().in_atomic_block, "events are written inside the transaction that numbers them"
    # The trace is written redacted (secrets, card numbers, emails as configured): the run's own
    # state keeps what it needs to resume, the receipt keeps digests.
    kinds, secrets = settings.WARRANT["REDACT"], redaction.env_secrets()
    prev = _head_at(run, first_seq - 1)
    rows = []
    for seq, (step, kind, data) in enumerate(events, start=first_seq):
        prev, data = chain_event(prev=prev, seq=seq, step=step, kind=kind,
                                 data=redaction.redact(data, kinds=kinds, secrets=secrets))
        rows.append(RunEvent(run_id=run.id, seq=seq, step=step, kind=kind, data=data, hash=prev))
    RunEvent.objects.bulk_create(rows)
    head = (first_seq + len(events) - 1, prev)
    # The next write of this run in this process chains to it without a read, once it is
    # committed: a rolled-back write must leave nothing to chain to.
    transaction.on_commit(partial(setattr, run, "trace_head", head))
    return head


def _head_at(run: Run, seq: int) -> str:
    """The hash of the run's event #seq, the link the next event chains to. This process's last
    committed write of the run knows it; a writer that has just read the run under its lock
    reads it here (a statement of its own: folded into the locking read as a subquery it cost
    more to build than the round trip, and on PostgreSQL a subquery of a read that waited for
    the lock sees the statement's older snapshot)."""
    if seq <= 0:
        return GENESIS
    known = getattr(run, "trace_head", None)
    if known is not None and known[0] == seq:
        return known[1]
    found = RunEvent.objects.filter(run_id=run.id, seq=seq).values_list("hash", flat=True).first()
    return found or GENESIS
