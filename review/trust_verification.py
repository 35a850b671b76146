"""Verification of the trust chain, with the offline verifier's own code (warrant_verify.trust_chain).

What only the database can tell is added here: each row's columns against its sealed body, and
each live mark against the chain: a source or built-in tool marked trusted that no sealed change
left trusted was marked behind agents.trust's back (an UPDATE of the column), or the change that
did it was removed with the chain re-signed. The chain is held against the trust checkpoints in
the witness file, as the review chain is (review.verification, which reports both).
"""

import json

from django.contrib.auth import get_user_model
from django.db import connection

from agents import append_only
from agents.models import Tool, ToolSource, TrustChange
from review.trust_chain import COLUMNS
from runs import witness
from runs.verification import Problem
from warrant_verify.messages import GENESIS
from warrant_verify.trust_chain import TRUST_CHECKPOINT_KIND, verify_trust_checkpoints, verify_trust_records

_CHUNK = 2000
_USERNAME = get_user_model().USERNAME_FIELD
_FIELDS = ("subject", "name", "trusted", "was_trusted", "reason", "at", "changed_by", "proposed_by")
_SEALED = ("subject", "name", "trusted", "was_trusted", "reason", "changed_at", f"changed_by__{_USERNAME}",
           f"proposed_by__{_USERNAME}")


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
    sealed = tuple(body.get(f) for f in _FIELDS[:-2]) + tuple(_username(body.get(f)) for f in _FIELDS[-2:])
    stored = (row["subject"], row["name"], row["trusted"], row["was_trusted"], row["reason"],
              witness._iso(row["changed_at"]), row[_SEALED[-2]], row[_SEALED[-1]])
    fields = [f for f, a, b in zip(_FIELDS, sealed, stored, strict=True) if a != b]
    if not fields:
        return []
    verb = "differs" if len(fields) == 1 else "differ"
    return [Problem("trust", f"trust change #{row['seq']}", f"the row's {', '.join(fields)} {verb} from what the "
                                                            "change sealed")]


def _unvouched(marks: dict) -> list[Problem]:
    """Marks trusted now that the chain's last change of them does not leave trusted."""
    live = [("tool_source", "tool source", name) for name in ToolSource.objects.filter(trusted=True)
            .values_list("name", flat=True)]
    live += [("tool", "tool", name) for name in Tool.objects.filter(trusted_output=True, tool_source=None)
             .values_list("name", flat=True)]
    return [Problem("trust", f"{noun} {name}", "is marked trusted, but no sealed trust change left it trusted: the "
                                               "mark was set outside agents.trust, or its change was removed")
            for subject, noun, name in live if marks.get((subject, name)) is not True]


def trust_verify_problems(*, keys, made_at: str) -> tuple[int, int, list[Problem]]:
    """(changes checked, trust checkpoints in the witness file, problems): links, hashes, bodies,
    signatures, rows against bodies, live marks against the chain, the witness's trust checkpoints,
    and the append-only triggers on the rows."""
    lines, _bad = witness.witness_file_checkpoints(TRUST_CHECKPOINT_KIND)  # review.verification reports bad lines
    wanted = {line.get("seq") for line in lines}
    problems: list[Problem] = []
    hash_at: dict[int, str] = {}
    marks: dict[tuple[str, str], bool] = {}
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
                marks[(body.get("subject"), body.get("name"))] = body.get("trusted")
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
    return checked, len(lines), problems + _unvouched(marks)
