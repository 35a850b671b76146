"""Receipts sealed before receipts were signed (format v1): hash-chained, unsigned, told apart.

Before signing (Warrant's runs migration 0009) a receipt was a JSON body with no "v" member,
chained like today's (hash = sha256(prev_hash + body)), and marked with a key that the upgrade
removed. Nobody can sign such a receipt after the fact without vouching for what they never saw,
so the verifier tells them apart instead of failing them: an unsigned receipt (no key id, no
signature) whose body has no "v" and which comes before every signed receipt and before every
checkpoint of the chain is a legacy receipt (checkpoints are signed, and only ever of the head, so
a receipt past one was sealed after signing began). Its hash and its link are checked, and the first signed receipt after it, whose
prev_hash chains through it, is what pins it. The same receipt after a signed one is not legacy:
signing was on by then, so it was made or edited by someone without the key, and it fails.

A legacy body binds less than a v2 body: no trace head, and approvals without how the decider
signed in or their reason. The trace is not checked for it; its approvals are compared on the
fields it sealed.
"""

import json

from .messages import receipt_hash

# What a v1 receipt sealed of each approval.
V1_APPROVAL_FIELDS = ("id", "tool", "arguments_sha256", "approver_role", "decision", "decided_by", "decided_at")
AFTER_SIGNING = ("unsigned receipt after signing began (a receipt or checkpoint before it is signed): not one "
                 "from before signing, so it was made or edited without the key")


def is_legacy(record) -> bool:
    """Shaped as a receipt from before signing: no key id, no signature, a JSON object body with no "v"."""
    if not isinstance(record, dict) or record.get("key_id") != "" or record.get("signature") != "":
        return False
    try:
        body = json.loads(record.get("body"))
    except (TypeError, ValueError, RecursionError):
        return False
    return isinstance(body, dict) and "v" not in body


def is_legacy_body(body: dict) -> bool:
    return "v" not in body


def v1_approvals(approvals: list) -> list:
    """Approvals as a v1 body sealed them (rows in today's shape, cut to v1's fields)."""
    return [{name: row.get(name) for name in V1_APPROVAL_FIELDS} if isinstance(row, dict) else row
            for row in approvals]


def legacy_note(count: int, first: int | None, last: int | None, *, pinned: bool) -> str:
    """The summary's statement of the legacy receipts: not a failure, but said."""
    if not count:
        return ""
    pin = ("pinned by the first signed receipt after them" if pinned
           else "no signed receipt follows them yet, so nothing signed pins them")
    return f"{count} legacy receipts (seq {first}-{last}) from before signing: hash-chained, unsigned, {pin}"


def legacy_problems(record: dict) -> list[str]:
    """What is checked of a legacy receipt by itself: its hash, and that its body names its run."""
    try:
        if receipt_hash(record["prev_hash"], record["body"]) != record["hash"]:
            return ["hash is not sha256(prev_hash + body): the body or a hash was edited"]
    except UnicodeEncodeError:
        return ["body is not valid Unicode text"]
    named = json.loads(record["body"]).get("run_id")
    return [] if named == record["run_id"] else [f"body names run {named!r}, the receipt run {record['run_id']}"]


def after_signing(legacy: list, checkpoint_seqs) -> list:
    """Of the legacy-shaped receipts `legacy` (seqs), those past the first checkpoint: a checkpoint
    is signed and names the head when it was made, so a receipt after it was sealed after signing
    began and cannot be from before signing."""
    first = min((seq for seq in checkpoint_seqs if type(seq) is int), default=None)
    return [seq for seq in legacy if first is not None and type(seq) is int and seq > first]
