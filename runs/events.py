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
    rows, head = chain_rows(run, first_seq, events)
    insert_rows(run, rows, head)
    return head


def chain_rows(run: Run, first_seq: int, events: list[Event]) -> tuple[list[RunEvent], tuple[int, str]]:
    """The rows of `events` numbered from `first_seq`, redacted and chained, and the head they make,
    not yet written: the writer that reserves the numbers (runs.lifecycle) puts the head on the run
    in the same statement, then inserts them."""
    # The trace is written redacted (secrets, card numbers, emails as configured): the run's own
    # state keeps what it needs to resume, the receipt keeps digests.
    kinds, secrets = settings.WARRANT["REDACT"], redaction.env_secrets()
    prev = _head_at(run, first_seq - 1)
    rows = []
    for seq, (step, kind, data) in enumerate(events, start=first_seq):
        prev, data = chain_event(prev=prev, seq=seq, step=step, kind=kind,
                                 data=redaction.redact(data, kinds=kinds, secrets=secrets))
        rows.append(RunEvent(run_id=run.id, seq=seq, step=step, kind=kind, data=data, hash=prev))
    return rows, (first_seq + len(events) - 1, prev)


def insert_rows(run: Run, rows: list[RunEvent], head: tuple[int, str]) -> None:
    assert transaction.get_connection().in_atomic_block, "events are written inside the transaction that numbers them"
    RunEvent.objects.bulk_create(rows)
    # The next write of this run in this process chains to it without a read, once it is
    # committed: a rolled-back write must leave nothing to chain to.
    transaction.on_commit(partial(setattr, run, "trace_head", head))


def tip(head: tuple[int, str]) -> str:
    """Run.trace_tip of a head (seq, hash)."""
    return f"{head[0]}:{head[1]}"


def _head_at(run: Run, seq: int) -> str:
    """The hash of the run's event #seq, the link the next event chains to. This process's last
    committed write of the run knows it, and so does the row as read (Run.trace_tip, when it is
    the tip at that seq); otherwise it is read here (a statement of its own: folded into a locking
    read as a subquery it cost more to build than the round trip, and on PostgreSQL a subquery of
    a read that waited for the lock sees the statement's older snapshot)."""
    if seq <= 0:
        return GENESIS
    known = getattr(run, "trace_head", None)
    if known is not None and known[0] == seq:
        return known[1]
    if "trace_tip" not in run.get_deferred_fields():
        at, _, hash_ = run.trace_tip.partition(":")
        if at == str(seq) and hash_:
            return hash_
    # Ordered by seq, not RunEvent's default ("run", "seq"), which joins runs_run to sort one row.
    found = RunEvent.objects.filter(run_id=run.id, seq=seq).order_by("seq").values_list("hash", flat=True).first()
    return found or GENESIS
