"""Verification of the trust chain, with the offline verifier's own code (warrant_verify.trust_chain).

What only the database can tell is added here: each row's columns against its sealed body, and
each live mark and approval against the chain. A source or built-in tool marked trusted that no
sealed change left trusted was marked behind agents.trust's back (an UPDATE of the column), or the
change that did it was removed with the chain re-signed. A tool that no longer requires approval,
or a tool or source whose approver role is not the one, when the newest sealed approval change of
it left approval required or that role set, was loosened behind agents.trust_approval's back (only
a confirmed proposal loosens, and each one is sealed; so is each one-step tightening, so that the
newest sealed change is the approval the target was last given). A tool or source with no sealed
approval change is not held to anything here: the chain records changes, not the approval every
tool was given when it was made (SECURITY.md says what that leaves).

A trusted source's tool is held to the newest sealed re-approval of it: its approved fingerprint
is that record's `after`, unless the source's mark changed since (sealed), for while it was
untrusted one governance admin re-approved its tools, unsealed. A tool with no sealed re-approval
since its source was last trusted is held to nothing here (its first fingerprint is the sync's).

The chain's head is read first, then the live state, then the chain: a target with a change sealed
after that head changed while the check ran, so its live state may be from either side of it, and
it is left to the next check. The chain is held against the trust checkpoints in the witness file,
as the review chain is (review.verification, which reports both).
"""

import json

from django.contrib.auth import get_user_model
from django.db import connection

from agents import append_only
from agents.models import Tool, ToolSource, TrustChange
from review.trust_chain import BODY_KINDS, COLUMNS, trust_head
from runs import witness
from runs.verification import Problem
from warrant_verify.messages import GENESIS
from warrant_verify.trust_chain import APPROVAL_KIND, KIND, REAPPROVAL_KIND, TRUST_CHECKPOINT_KIND, \
    verify_trust_checkpoints, verify_trust_records

_CHUNK = 2000
_USERNAME = get_user_model().USERNAME_FIELD
_ROW_KINDS = {body: row for row, body in BODY_KINDS.items()}
_PEOPLE = {"changed_by": f"changed_by__{_USERNAME}", "proposed_by": f"proposed_by__{_USERNAME}"}
_PLAIN = ("subject", "name", "trusted", "was_trusted", "before", "after", "reason")
_SEALED = ("kind", *_PLAIN, "changed_at", *_PEOPLE.values())


def chunks(queryset, size: int):
    """The rows in lists of `size`, read as they come: a long chain never sits in memory whole."""
    chunk: list[dict] = []
    for row in queryset.iterator(chunk_size=size):
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _body(row: dict) -> dict | None:
    try:
        body = json.loads(row["body"])
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _username(person):
    return person.get("username") if isinstance(person, dict) else person


def _cross_check(row: dict, body: dict) -> list[Problem]:
    sealed = {"kind": _ROW_KINDS.get(body.get("kind"), body.get("kind")), **{f: body.get(f) for f in _PLAIN},
              "at": body.get("at"), **{f: _username(body.get(f)) for f in _PEOPLE}}
    stored = {"kind": row["kind"], **{f: row[f] for f in _PLAIN}, "at": witness._iso(row["changed_at"]),
              **{f: row[column] for f, column in _PEOPLE.items()}}
    fields = [f for f in sealed if sealed[f] != stored[f]]
    if not fields:
        return []
    verb = "differs" if len(fields) == 1 else "differ"
    return [Problem("trust", f"trust change #{row['seq']}", f"the row's {', '.join(fields)} {verb} from what the "
                                                            "change sealed")]


def _live() -> dict:
    """What is marked trusted now, and every tool's and source's approval, by (subject, name)."""
    trusted = {("tool_source", name) for name in ToolSource.objects.filter(trusted=True).values_list("name", flat=True)}
    trusted |= {("tool", name) for name in Tool.objects.filter(trusted_output=True, tool_source=None)
                .values_list("name", flat=True)}
    approval = {("tool", name): {"requires_approval": required, "approver_role": role}
                for name, required, role in Tool.objects.values_list("name", "requires_approval", "approver_role__name")}
    approval |= {("tool_source", name): {"approver_role": role}
                 for name, role in ToolSource.objects.values_list("name", "approver_role__name")}
    approved = {name: (source, sha256) for name, source, sha256 in Tool.objects.filter(tool_source__trusted=True)
                .values_list("name", "tool_source__name", "approved_sha256")}
    return {"trusted": trusted, "approval": approval, "approved": approved}


_NOUNS = {"tool_source": "tool source", "tool": "tool"}


def _unvouched(live: dict, marks: dict) -> list[Problem]:
    """Marks trusted now that the chain's last change of them does not leave trusted."""
    return [Problem("trust", f"{_NOUNS[subject]} {name}", "is marked trusted, but no sealed trust change left it "
                                                          "trusted: the mark was set outside agents.trust, or its "
                                                          "change was removed")
            for subject, name in sorted(live["trusted"]) if marks.get((subject, name)) is not True]


def _loosened(live: dict, approvals: dict) -> list[Problem]:
    """Approvals looser now than the newest sealed approval change of them left them."""
    problems = []
    for (subject, name), (seq, after) in sorted(approvals.items()):
        now = live["approval"].get((subject, name))
        if now is None or not isinstance(after, dict):
            continue  # gone since, or a body the chain check reported
        said = []
        if after.get("requires_approval") is True and now.get("requires_approval") is False:
            said.append("it no longer requires approval")
        if isinstance(after.get("approver_role"), str) and now["approver_role"] != after["approver_role"]:
            said.append(f"its approver role is {now['approver_role']!r}, not {after['approver_role']!r} (or that "
                        "role was renamed)")
        if said:
            left = ", ".join(f"{field} {value!r}" for field, value in sorted(after.items()))
            problems.append(Problem("trust", f"{_NOUNS[subject]} {name}", f"{' and '.join(said)}, where the newest "
                                    f"sealed approval change of it (#{seq}) left {left}: it was loosened outside "
                                    "agents.trust_approval, or the change that did it was removed"))
    return problems


def _reapproved_around(live: dict, reapprovals: dict, marked_at: dict) -> list[Problem]:
    """Trusted sources' tools whose approved fingerprint is not the one the newest sealed re-approval
    of them left, when their source's mark has not changed since."""
    problems = []
    for name, (source, sha256) in sorted(live["approved"].items()):
        if name not in reapprovals:
            continue
        seq, after = reapprovals[name]
        sealed = after.get("approved_sha256") if isinstance(after, dict) else None
        if not isinstance(sealed, str) or marked_at.get(("tool_source", source), 0) > seq or sha256 == sealed:
            continue  # a body the chain check reported, or re-trusted since (re-approved by one meanwhile)
        problems.append(Problem("trust", f"tool {name}", f"its approved fingerprint is {sha256[:12] or 'empty'}, "
                                f"where the newest sealed re-approval of it (#{seq}) left {sealed[:12]} and its "
                                f"source {source} has been trusted since: a held change was accepted outside "
                                "agents.trust_approval, or the re-approval that did it was removed"))
    return problems


def trust_verify_problems(*, keys, made_at: str) -> tuple[int, int, list[Problem]]:
    """(changes checked, trust checkpoints in the witness file, problems): links, hashes, bodies,
    signatures, rows against bodies, live marks and approvals against the chain, the witness's trust
    checkpoints, and the append-only triggers on the rows."""
    head_seq = trust_head()[0]
    live = _live()
    lines, _bad = witness.witness_file_checkpoints(TRUST_CHECKPOINT_KIND)  # review.verification reports bad lines
    wanted = {line.get("seq") for line in lines}
    problems: list[Problem] = []
    hash_at: dict[int, str] = {}
    marks: dict[tuple[str, str], bool] = {}
    approvals: dict[tuple[str, str], tuple[int, dict]] = {}
    reapprovals: dict[str, tuple[int, dict]] = {}
    marked_at: dict[tuple[str, str], int] = {}
    moving: set[tuple[str, str]] = set()  # changed since the head read before the live state
    checked, start_seq, start_prev, seen = 0, 1, GENESIS, {}

    def walk(rows):
        nonlocal checked, start_seq, start_prev
        result = verify_trust_records([{c: r[c] for c in COLUMNS} for r in rows], keys=keys, start_seq=start_seq,
                                      start_prev=start_prev, file="agents_trustchange", seen=seen)
        for failure in result.failures:
            check = "signature" if ("signature" in failure.reason or "signed by" in failure.reason) else "trust_chain"
            problems.append(Problem(check, f"trust change {failure.record}", failure.reason))
        for row in rows:
            if (body := _body(row)) is not None:
                problems.extend(_cross_check(row, body))
                target = (body.get("subject"), body.get("name"))
                if row["seq"] > head_seq:
                    moving.add(target)
                if body.get("kind") == KIND:
                    marks[target] = body.get("trusted")
                    marked_at[target] = row["seq"]
                elif body.get("kind") == APPROVAL_KIND:
                    approvals[target] = (row["seq"], body.get("after"))
                elif body.get("kind") == REAPPROVAL_KIND:
                    reapprovals[body.get("name")] = (row["seq"], body.get("after"))
        checked += result.checked
        hash_at.update({seq: hash_ for seq, hash_ in result.hashes.items() if seq in wanted})
        start_seq, start_prev = result.head_seq + 1, result.head_hash

    for rows in chunks(TrustChange.objects.order_by("seq").values(*COLUMNS, *_SEALED), _CHUNK):
        walk(rows)
    found = [{k: v for k, v in line.items() if k != "_line"} for line in lines]
    problems += [Problem("witness", f"witness file: {failure.record}", failure.reason) for failure in
                 verify_trust_checkpoints(found, keys=keys, hash_at=hash_at, head_seq=start_seq - 1, made_at=made_at,
                                          file="witness", labels=[f"line {line['_line']}" for line in lines])]
    problems += [Problem("append_only", name, "the append-only trigger is missing or disabled")
                 for name in append_only.TRIGGERS.missing(connection)]
    live = {"trusted": {t for t in live["trusted"] if t not in moving},
            "approval": {t: a for t, a in live["approval"].items() if t not in moving},
            "approved": {name: (source, sha256) for name, (source, sha256) in live["approved"].items()
                         if ("tool", name) not in moving and ("tool_source", source) not in moving}}
    return checked, len(lines), problems + _unvouched(live, marks) + _loosened(live, approvals) + _reapproved_around(
        live, reapprovals, marked_at)
