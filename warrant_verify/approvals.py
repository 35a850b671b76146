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
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from . import jcs
from .chain import parse_jsonl
from .shapes import Failure

APPROVAL_KIND = "approval_change"
SLACK = timedelta(seconds=1)  # sealed times are whole seconds; a snapshot's state is read about when it is dated


@dataclass(frozen=True)
class Seen:
    """One tool_call event's approval, and when its run's snapshot was frozen."""

    at: datetime
    order: tuple  # ties in time broken by receipt seq, then event seq
    run_id: str
    event: object
    tool: str
    requires_approval: bool
    approver_role: str | None


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


def sealed_changes(data: bytes | None) -> dict[tuple[str, str], list[datetime]]:
    """(subject, name) -> the times of the approval changes sealed of it in trust.jsonl. The chain's
    own links, signatures and extent are checked by trust_chain; this only reads what it says."""
    found: dict[tuple[str, str], list[datetime]] = {}
    rows, _ = parse_jsonl(data or b"", "trust.jsonl")
    for _, record in rows:
        try:
            body = jcs.loads(record.get("body", ""))
        except (ValueError, RecursionError, TypeError):
            continue
        if not isinstance(body, dict) or body.get("kind") != APPROVAL_KIND:
            continue
        at = parse_time(body.get("at"))
        if at is not None and isinstance(body.get("subject"), str) and isinstance(body.get("name"), str):
            found.setdefault((body["subject"], body["name"]), []).append(at)
    return found


def verify_approval_history(seen: list[Seen], sealed: dict[tuple[str, str], list[datetime]],
                            file: str = "events.jsonl") -> list[Failure]:
    """Each loosening between two consecutive observations of a tool against the sealed changes."""
    failures = []
    by_tool: dict[str, list[Seen]] = {}
    for one in seen:
        by_tool.setdefault(one.tool, []).append(one)
    for tool, history in by_tool.items():
        history.sort(key=lambda one: (one.at, one.order))
        source = tool.split("__", 1)[0] if "__" in tool else None
        for before, after in zip(history, history[1:]):
            what = _loosened(before, after)
            if what is None:
                continue
            times = list(sealed.get(("tool", tool), ()))
            if what == "role" and source is not None:
                times += sealed.get(("tool_source", source), ())
            if any(before.at - SLACK <= at <= after.at + SLACK for at in times):
                continue
            of = "it or its source" if what == "role" and source is not None else "it"
            failures.append(Failure(file, f"run {after.run_id} event {after.event}", (
                f"{tool} ran with {_described(after)}, but run {before.run_id} event {before.event} saw "
                f"{_described(before)}, and no sealed approval change of {of} in trust.jsonl lies between "
                "them: its approval was loosened with no record")))
    return failures
