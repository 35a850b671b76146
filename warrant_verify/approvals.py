"""The approvals the signed traces say each tool ran under, held to the trust chain's sealed changes.

Each tool_call event of a call that ran records the approval its run's frozen snapshot gave the tool
(`approval`: requires_approval and the approver role by name; runs.tool_batch). Across the bundle's
runs, in the order their snapshots were frozen, a tool's approval may tighten at will, but a
loosening between two runs that saw it (requires_approval lifted, a set approver role changed or
cleared) is one two governance admins confirmed, and so is sealed in trust.jsonl between them: an
approval change of the tool, or, for a role alone, of its source. A requires_approval lifted with an
UPDATE and no record shows here, in the traces of the runs on either side of it.

A run's time is when its snapshot was frozen (`frozen_at` in its run_created event, runs.start),
else (a run from before the field) its receipt's started_at, which comes at or after the freeze: such
a run that waited in the queue across a change may be placed after a run frozen later. Sealed
changes carry their time to the second, so the window between two runs is widened by one second
each way. Events from before the field carry no approval and are not checked; a loosening no
earlier run in the bundle saw the other side of leaves nothing to compare.

A one-step tightening of a tool's approval is sealed too (an approval change with no proposer,
warrant_verify.trust_chain): it is no loosening, so it opens no window, but it says what the
approval was and became, and each side counts as a run's observation would, so a requires_approval
lifted by an UPDATE after such a tightening shows against the next run that ran the tool loose,
though no run in the bundle ran it gated. Sealed changes among themselves are ordered by seq. A run
frozen within the second a tightening was sealed in may have come before or after it, so the two
are not compared.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from . import jcs
from .chain import parse_jsonl
from .shapes import Failure
from .trust_chain import tightening

APPROVAL_KIND = "approval_change"
SLACK = timedelta(seconds=1)  # sealed times are whole seconds; a snapshot's state is read about when it is dated


@dataclass(frozen=True)
class Seen:
    """One tool_call event's approval, and when its run's snapshot was frozen."""

    at: datetime
    order: tuple  # ties in time broken by receipt seq, then event seq (a sealed tightening: 0, seq, 0 before or 1 after)
    run_id: str
    event: object
    tool: str
    requires_approval: bool
    approver_role: str | None
    where: str = ""  # a sealed tightening's place in trust.jsonl ("seq N"); empty for a run's event
    verb: str = "ran with"  # what the failure says the tool did with this approval


def _said(one: Seen) -> str:
    return f"trust change #{one.event} says" if one.where else f"run {one.run_id} event {one.event} saw"


class Sealed(dict):
    """(subject, name) -> the times of the loosenings sealed of it; `tightened`: what the sealed
    one-step tightenings of tools say, as observations."""

    def __init__(self):
        super().__init__()
        self.tightened: list[Seen] = []
        self.seqs: dict[tuple[str, str], list[tuple[datetime, int]]] = {}  # the loosenings' times and seqs

    def between(self, key: tuple[str, str], before: Seen, after: Seen) -> list[datetime]:
        """The times of the key's loosenings that the chain's order allows between the two: after a
        sealed tightening on the `before` side, before one on the `after` side."""
        low = before.event if before.where else 0
        high = after.event if after.where else None
        return [at for at, seq in self.seqs.get(key, ()) if seq > low and (high is None or seq < high)]


def parse_time(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def approval_problem(approval) -> str | None:
    if not (isinstance(approval, dict) and set(approval) == {"requires_approval", "approver_role"}
            and isinstance(approval["requires_approval"], bool)
            and (approval["approver_role"] is None or (isinstance(approval["approver_role"], str)
                                                        and approval["approver_role"]))):
        return "the approval it ran under is not {requires_approval: a boolean, approver_role: a name or null}"
    return None


def called_problem(data: dict) -> str | None:
    """A call the trace says needed approval names the approval, or the standing approval, it ran on."""
    approval = data["approval"]
    if approval["requires_approval"] and not (data.get("approval_id") or data.get("standing_approval_id")):
        return (f"{data.get('name')} ran with {_described(approval)}, but the trace names no approval_id "
                "or standing_approval_id for the call")
    return None


def _described(state) -> str:
    role = state["approver_role"] if isinstance(state, dict) else state.approver_role
    required = state["requires_approval"] if isinstance(state, dict) else state.requires_approval
    named = f"approver role {role!r}" if role else "no approver role"
    return f"approval required ({named})" if required else f"no approval required ({named})"


def _loosened(before: Seen, after: Seen) -> str | None:
    """'tool' when requires_approval was lifted, 'role' when only a set role changed or was cleared."""
    if before.requires_approval and not after.requires_approval:
        return "tool"
    if before.approver_role is not None and after.approver_role != before.approver_role:
        return "role"
    return None


def _unordered(one: Seen, other: Seen) -> bool:
    """A run and a sealed tightening whose order time cannot tell: the run was frozen within the
    second the change was sealed in (its time is that second's start)."""
    if bool(one.where) == bool(other.where):
        return False
    sealed, run = (one, other) if one.where else (other, one)
    return sealed.at <= run.at < sealed.at + SLACK


def sealed_changes(data: bytes | None) -> Sealed:
    """(subject, name) -> the times of the approval loosenings sealed of it in trust.jsonl, and the
    tools' tightenings as observations. The chain's own links, signatures, extent and who may make
    which change are checked by trust_chain; this only reads what it says."""
    found = Sealed()
    rows, _ = parse_jsonl(data or b"", "trust.jsonl")
    for _, record in rows:
        try:
            body = jcs.loads(record.get("body", ""))
        except (ValueError, RecursionError, TypeError):
            continue
        if not isinstance(body, dict) or body.get("kind") != APPROVAL_KIND:
            continue
        at = parse_time(body.get("at"))
        if at is None or not isinstance(body.get("subject"), str) or not isinstance(body.get("name"), str):
            continue
        seq = record.get("seq") if isinstance(record.get("seq"), int) else 0
        if not tightening(body["subject"], body.get("before"), body.get("after")):
            found.setdefault((body["subject"], body["name"]), []).append(at)
            found.seqs.setdefault((body["subject"], body["name"]), []).append((at, seq))
        elif body["subject"] == "tool":
            found.tightened += [Seen(at=at, order=(0, seq, side), run_id="", event=seq, tool=body["name"],
                                     requires_approval=state["requires_approval"],
                                     approver_role=state["approver_role"], where=f"seq {seq}", verb=verb)
                                for side, state, verb in ((0, body["before"], "was tightened from"),
                                                          (1, body["after"], "was tightened to"))]
    return found


def verify_approval_history(seen: list[Seen], sealed: dict[tuple[str, str], list[datetime]],
                            file: str = "events.jsonl") -> list[Failure]:
    """Each loosening between two consecutive observations of a tool against the sealed changes."""
    failures = []
    by_tool: dict[str, list[Seen]] = {}
    for one in [*seen, *getattr(sealed, "tightened", ())]:
        by_tool.setdefault(one.tool, []).append(one)
    for tool, history in by_tool.items():
        history.sort(key=lambda one: (one.at, one.order))
        source = tool.split("__", 1)[0] if "__" in tool else None
        for before, after in zip(history, history[1:]):
            what = _loosened(before, after)
            if what is None or _unordered(before, after):
                continue
            keys = [("tool", tool)] + ([("tool_source", source)] if what == "role" and source is not None else [])
            ordered = isinstance(sealed, Sealed) and (before.where or after.where)
            times = [at for key in keys for at in (sealed.between(key, before, after) if ordered else sealed.get(key, ()))]
            if any(before.at - SLACK <= at <= after.at + SLACK for at in times):
                continue
            of = "it or its source" if what == "role" and source is not None else "it"
            failures.append(Failure("trust.jsonl" if after.where else file, after.where or
                                    f"run {after.run_id} event {after.event}", (
                f"{tool} {after.verb} {_described(after)}, but {_said(before)} "
                f"{_described(before)}, and no sealed approval change of {of} in trust.jsonl lies between "
                "them: its approval was loosened with no record")))
    return failures
