"""The trust chain: every change of a trust mark (a governance admin saying a tool source's or a
built-in tool's output is trusted, so reading it does not taint a run), and every confirmed
two-person loosening of an approval (a tool's requires_approval lifted, a tool's or a source's
approver role changed or cleared) or re-approval of a trusted source's held tool, chained, signed
and witnessed like the review records, and checked by the same code (record_chain).

A record is {seq, prev_hash, hash, body, key_id, signature}; its signature covers seq, prev_hash,
hash and key id under a domain of its own. The body's kind says which change it records:
"trust_change" (from what mark to what), "approval_change" (the approval `before` and `after`, by
role name) or "reapproval" (the tool's approved fingerprint before and after), with who changed it
(with the roles they held) and why; from v2, who proposed what the changer confirmed. A person
marking something trusted with no proposer, or with themselves as proposer, is a failure here, and
so is a re-approval that names no proposer, or its confirmer as its proposer, and an approval
change that does so unless it tightens (requires approval where none was required, names a role
where there was none, and loosens nothing: one governance admin's act, or the platform's, sealed
so that an UPDATE undoing it shows on the server); as is a v1 body after a v2 one (the two new kinds exist only as v2). Without the chain a
DBA could mark a source trusted, let runs read it untainted, mark it back and delete both rows; now
the gap in seq, the witness's checkpoints and the signed extent in an evidence bundle each show it.

What the chain does not hold is a tool's approval as it stands: a requires_approval lifted by an
UPDATE, with no record at all, leaves the chain intact. The signed traces say what approval each
call ran under, and warrant_verify.approvals holds their changes from run to run to the chain
(SECURITY.md says what that covers).
"""

from . import jcs
from .chain import ChainResult, Failure, is_hex64
from .messages import GENESIS
from .record_chain import RecordChain, verify_chain_checkpoints, verify_chain_file, verify_chain_records

TRUST_DOMAIN = b"warrant.trust.v1\n"
TRUST_CHECKPOINT_DOMAIN = b"warrant.trust-checkpoint.v1\n"
TRUST_CHECKPOINT_KIND = "warrant.trust-checkpoint"
TRUST_FILE = "trust.jsonl"  # the whole trust chain, #1 to its head when the bundle was made
FORMAT = 2  # the newest body version: v1 bodies (sealed before trust proposals) come only before the first v2
VERSIONS = (1, 2)
KIND = "trust_change"
APPROVAL_KIND = "approval_change"  # a confirmed proposal of kind "approval", or a one-step tightening
REAPPROVAL_KIND = "reapproval"  # a confirmed proposal of kind "change"
KINDS = (KIND, APPROVAL_KIND, REAPPROVAL_KIND)
SUBJECTS = ("tool_source", "tool")
# The kinds only a confirmed proposal makes: what was done, and the doing of it, in reports.
_CONFIRMED = {APPROVAL_KIND: ("loosened its approval", "loosening its approval"),
              REAPPROVAL_KIND: ("re-approved its change", "re-approving its change")}


def _person_problem(person, field: str) -> str | None:
    if person is not None and not (isinstance(person, dict) and isinstance(person.get("username"), str)):
        return f"{field} is neither null (the platform) nor a user's name and roles"
    return None


def _proposal_problems(body: dict) -> list[str]:
    """v2: a mark of trust set by a person names who proposed it, someone else; so does every approval
    change that loosens and every re-approval (only a second governance admin's confirmation makes
    one); nothing else does."""
    if "proposed_by" not in body:
        return ["a v2 body without proposed_by"]
    proposer, by = body["proposed_by"], body.get("changed_by")
    if proposer is not None and not (isinstance(proposer, dict) and isinstance(proposer.get("username"), str)
                                     and isinstance(proposer.get("at"), str)):
        return ["proposed_by is neither null nor a user's name, roles and when they proposed"]
    if body.get("kind") == APPROVAL_KIND and proposer is None and tightening(body.get("subject"), body.get("before"),
                                                                             body.get("after")):
        return []  # one person's, or the platform's (changed_by null), as every tightening is
    if body.get("kind") in _CONFIRMED:
        did, doing = _CONFIRMED[body["kind"]]
        if not isinstance(by, dict):
            return [f"{did} with no one named as confirming it: only a second governance admin's confirmation does"]
        return _second_person(by, proposer, did, doing)
    if body.get("trusted") is True and isinstance(by, dict):
        return _second_person(by, proposer, "marked it trusted", "marking it trusted")
    if proposer is not None:
        return ["proposed_by on a change that needs no proposal (an untrusting, or the platform's own)"]
    return []


def _second_person(by: dict, proposer, did: str, doing: str) -> list[str]:
    if proposer is None:
        return [f"{by.get('username')!r} {did} alone: no second governance admin proposed it"]
    if proposer.get("username") == by.get("username"):
        return [f"{by.get('username')!r} both proposed and confirmed {doing}"]
    return []


def _approval_problem(subject, state) -> str | None:
    fields = {"approver_role"} | ({"requires_approval"} if subject == "tool" else set())
    if not isinstance(state, dict) or set(state) != fields:
        return f"is not an approval ({', '.join(sorted(fields))})"
    role = state["approver_role"]
    if not (role is None or (isinstance(role, str) and role)) or not isinstance(state.get("requires_approval", False),
                                                                                 bool):
        return "names a role that is neither null nor a name, or a requires_approval that is not a boolean"
    return None


def looser(before: dict, after: dict) -> bool:
    """Whether `after` loosens `before` (approvals by name): requires_approval lifted, or a set
    approver role changed or cleared."""
    if before.get("requires_approval") and not after.get("requires_approval"):
        return True
    return before.get("approver_role") is not None and after.get("approver_role") != before.get("approver_role")


def tightening(subject, before, after) -> bool:
    """Whether an approval change's before and after are approvals of the subject, unlike, and the
    change loosens nothing."""
    return (_approval_problem(subject, before) is None and _approval_problem(subject, after) is None
            and before != after and not looser(before, after))


def _fingerprint_problem(state, *, after: bool) -> str | None:
    value = state.get("approved_sha256") if isinstance(state, dict) else None
    if not isinstance(state, dict) or set(state) != {"approved_sha256"} or not (
            is_hex64(value) or (not after and value in (None, ""))):
        return "is not {approved_sha256: a fingerprint}"
    return None


def _change_problems(body: dict) -> list[str]:
    """What an approval change or a re-approval says of its tool: the state before and after, unlike."""
    kind, subject = body.get("kind"), body.get("subject")
    if "trusted" in body or "was_trusted" in body:
        return [f"a trust mark in a body of kind {kind}"]
    if kind == REAPPROVAL_KIND and subject != "tool":
        return ["a re-approval is of a tool, not of a source"]
    problems = []
    for side in ("before", "after"):
        state = body.get(side)
        problem = _approval_problem(subject, state) if kind == APPROVAL_KIND else _fingerprint_problem(
            state, after=side == "after")
        if problem:
            problems.append(f"{side} {problem}")
    if not problems and body["before"] == body["after"]:
        problems.append(f"a {kind} body whose before and after are the same")
    return problems


def _body_problems(body: dict, record: dict) -> list[str]:
    problems = []
    kind = body.get("kind")
    if body.get("v") not in VERSIONS:
        problems.append(f"body v is {body.get('v')!r}, not one of {', '.join(map(str, VERSIONS))}")
    elif kind != KIND and body.get("v") != 2:
        problems.append(f"{kind} bodies are v2 (the kind came with trust proposals), this one is v{body.get('v')}")
    if kind not in KINDS:
        problems.append(f"body kind {kind!r} is not one of {', '.join(KINDS)}")
    if body.get("subject") not in SUBJECTS:
        problems.append(f"body subject {body.get('subject')!r} is not one of {', '.join(SUBJECTS)}")
    if not isinstance(body.get("name"), str) or not body.get("name"):
        problems.append("body names no tool or source")
    if kind == KIND:
        trusted, was = body.get("trusted"), body.get("was_trusted")
        if not (isinstance(trusted, bool) and isinstance(was, bool)) or trusted == was:
            problems.append("a trust change goes from one boolean mark to the other")
    elif kind in KINDS:
        problems += _change_problems(body)
    if problem := _person_problem(body.get("changed_by"), "changed_by"):
        problems.append(problem)
    if body.get("v") == 2:
        problems += _proposal_problems(body)
    return problems


def _version_problems(record: dict, seen: dict) -> list[str]:
    """Body versions never go back: once a v2 change is sealed, a v1 one (which names no proposer)
    is one sealed around the two-person rule."""
    try:
        version = jcs.loads(record.get("body", "")).get("v")
    except (ValueError, RecursionError, TypeError, AttributeError):
        return []
    if version == 1 and seen.get("v2_at") is not None:
        return [f"a v1 body after the v2 trust change #{seen['v2_at']}: versions never go back"]
    if version == 2 and seen.get("v2_at") is None:
        seen["v2_at"] = record.get("seq")
    return []


TRUST = RecordChain(noun="trust change", name="trust", domain=TRUST_DOMAIN, checkpoint_domain=TRUST_CHECKPOINT_DOMAIN,
                    checkpoint_kind=TRUST_CHECKPOINT_KIND, file=TRUST_FILE, section="trust", ids={},
                    body_problems=_body_problems, neighbour_problems=_version_problems)


def trust_message(*, seq: int, prev_hash: str, hash: str, key_id: str) -> bytes:
    """What a trust change's signature covers: its place in the trust chain and its hash."""
    return TRUST.message(seq=seq, prev_hash=prev_hash, hash=hash, key_id=key_id)


trust_checkpoint_message = TRUST.checkpoint_message
is_trust_checkpoint = TRUST.is_checkpoint


def verify_trust_checkpoints(checkpoints, *, keys: dict, hash_at: dict, head_seq: int, made_at: str | None,
                             file: str, labels=None) -> list[Failure]:
    """Signed heads of the trust chain against its records' hashes (record_chain.verify_chain_checkpoints)."""
    return verify_chain_checkpoints(TRUST, checkpoints, keys=keys, hash_at=hash_at, head_seq=head_seq,
                                    made_at=made_at, file=file, labels=labels)


def verify_trust_records(records, *, keys: dict, start_seq: int = 1, start_prev: str = GENESIS,
                         file: str = TRUST_FILE, seen: dict | None = None) -> ChainResult:
    """`seen`: given, kept across calls, for a chain walked in chunks (record_chain.verify_chain_records)."""
    return verify_chain_records(TRUST, records, keys=keys, start_seq=start_seq, start_prev=start_prev, file=file,
                                seen=seen)


def verify_trust_file(data: bytes | None, *, keys: dict, section,
                      trusted_reads=()) -> tuple[list[Failure], str, ChainResult]:
    """trust.jsonl against the manifest's signed `trust` section: (failures, the summary's note,
    the chain as walked). A bundle from before the trust chain has neither file nor section.

    `trusted_reads`: (where, tool name) of each tool result the signed traces say was read as
    trusted (`source_trusted`). Each must name a built-in tool, or a tool of a source (its name's
    prefix before "__"), that some change in the chain made trusted: a mark set in the database
    with no change, then read by runs, shows here even when the chain itself is intact."""
    failures, note, result, rows = verify_chain_file(TRUST, data, keys=keys, section=section)
    if data or section is not None:
        made_trusted = set()
        for _, record in rows:
            try:
                body = jcs.loads(record.get("body", "")) if isinstance(record, dict) else None
            except (ValueError, RecursionError, TypeError):
                continue
            if isinstance(body, dict) and body.get("kind") == KIND and body.get("trusted") is True:
                made_trusted.add((body.get("subject"), body.get("name")))
        sources = {name for subject, name in made_trusted if subject == "tool_source" and isinstance(name, str)}
        for where, name in trusted_reads:
            if ("tool", name) not in made_trusted and not any(name.startswith(s + "__") for s in sources):
                failures.append(Failure("events.jsonl", where, f"the trace says {name}'s result was read as trusted, "
                                        f"but no change in {TRUST_FILE} ever made it or its source trusted"))
    return failures, note, result
