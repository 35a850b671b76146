"""The trust chain: every change of a trust mark (a governance admin saying a tool source's or a
built-in tool's output is trusted, so reading it does not taint a run), chained, signed and
witnessed like the review records, and checked by the same code (record_chain).

A record is {seq, prev_hash, hash, body, key_id, signature}; its signature covers seq, prev_hash,
hash and key id under a domain of its own. The body says what changed, from what to what, who
changed it (with the roles they held) and why; from v2, who proposed a mark of trust that the
changer confirmed: a person marking something trusted with no proposer, or with themselves as
proposer, is a failure here, as is a v1 body after a v2 one. Without the chain a DBA could mark a source trusted,
let runs read it untainted, mark it back and delete both rows; now the gap in seq, the witness's
checkpoints and the signed extent in an evidence bundle each show it.
"""

from . import jcs
from .chain import ChainResult, Failure
from .messages import GENESIS
from .record_chain import RecordChain, verify_chain_checkpoints, verify_chain_file, verify_chain_records

TRUST_DOMAIN = b"warrant.trust.v1\n"
TRUST_CHECKPOINT_DOMAIN = b"warrant.trust-checkpoint.v1\n"
TRUST_CHECKPOINT_KIND = "warrant.trust-checkpoint"
TRUST_FILE = "trust.jsonl"  # the whole trust chain, #1 to its head when the bundle was made
FORMAT = 2  # the newest body version: v1 bodies (sealed before trust proposals) come only before the first v2
VERSIONS = (1, 2)
KIND = "trust_change"
SUBJECTS = ("tool_source", "tool")


def _person_problem(person, field: str) -> str | None:
    if person is not None and not (isinstance(person, dict) and isinstance(person.get("username"), str)):
        return f"{field} is neither null (the platform) nor a user's name and roles"
    return None


def _proposal_problems(body: dict) -> list[str]:
    """v2: a mark of trust set by a person names who proposed it, someone else; nothing else does."""
    if "proposed_by" not in body:
        return ["a v2 body without proposed_by"]
    proposer, by = body["proposed_by"], body.get("changed_by")
    if proposer is not None and not (isinstance(proposer, dict) and isinstance(proposer.get("username"), str)
                                     and isinstance(proposer.get("at"), str)):
        return ["proposed_by is neither null nor a user's name, roles and when they proposed"]
    if body.get("trusted") is True and isinstance(by, dict):
        if proposer is None:
            return [f"{by.get('username')!r} marked it trusted alone: no second governance admin proposed it"]
        if proposer.get("username") == by.get("username"):
            return [f"{by.get('username')!r} both proposed and confirmed marking it trusted"]
    elif proposer is not None:
        return ["proposed_by on a change that needs no proposal (an untrusting, or the platform's own)"]
    return []


def _body_problems(body: dict, record: dict) -> list[str]:
    problems = []
    if body.get("v") not in VERSIONS:
        problems.append(f"body v is {body.get('v')!r}, not one of {', '.join(map(str, VERSIONS))}")
    if body.get("kind") != KIND:
        problems.append(f"body kind {body.get('kind')!r} is not {KIND}")
    if body.get("subject") not in SUBJECTS:
        problems.append(f"body subject {body.get('subject')!r} is not one of {', '.join(SUBJECTS)}")
    if not isinstance(body.get("name"), str) or not body.get("name"):
        problems.append("body names no tool or source")
    trusted, was = body.get("trusted"), body.get("was_trusted")
    if not (isinstance(trusted, bool) and isinstance(was, bool)) or trusted == was:
        problems.append("a trust change goes from one boolean mark to the other")
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
            if isinstance(body, dict) and body.get("trusted") is True:
                made_trusted.add((body.get("subject"), body.get("name")))
        sources = {name for subject, name in made_trusted if subject == "tool_source" and isinstance(name, str)}
        for where, name in trusted_reads:
            if ("tool", name) not in made_trusted and not any(name.startswith(s + "__") for s in sources):
                failures.append(Failure("events.jsonl", where, f"the trace says {name}'s result was read as trusted, "
                                        f"but no change in {TRUST_FILE} ever made it or its source trusted"))
    return failures, note, result
