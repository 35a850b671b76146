"""One receipt verified by its neighbourhood, not the whole chain (the API's and the workbench's answer).

A signed checkpoint at #S whose head is receipt #S's stored hash commits to every receipt up to S
(each hash covers the prev_hash before it). So one receipt is proven in place by: itself in full
(runs.verification's cross-check of its run, trace and approvals), the link to the receipt before it,
and every link and signature from it up to the nearest signed checkpoint at or after it. The witness
file's checkpoints come first: the holder of the signing key can sign database checkpoints for a
rewritten chain, not lines in a file outside the database. With no signed checkpoint at or after it
yet, the walk goes to the head and says the receipt is not yet anchored. The newest checkpoint of
each place is also held against the chain, so a cut-off tail is caught whichever receipt is asked
about. Everything else (every run, every checkpoint) is `manage.py verify_receipts`.
"""

from dataclasses import replace

from django.utils import timezone

from runs import signing, witness
from runs.models import Receipt, ReceiptCheckpoint
from runs.verification import (Problem, Verification, _checkpoint_problems, _not_sent, _record_of, _result, _walk,
                               checkpoint_signature_problem, cross_check, legacy_late, whole_chain_problems)
from warrant_verify.chain import is_int
from warrant_verify.messages import GENESIS

WHERE = {"witness": "witness", "checkpoints": "database"}


def _first_signed(documents, *, keys) -> dict | None:
    """The first of `documents` (in seq order) the signing keys made. Those before it lie inside the
    walk, where their failed signatures are reported with the rest."""
    return next((d for d in documents if not checkpoint_signature_problem(d, keys=keys)), None)


def _seq(document: dict) -> int:
    return document["seq"]


def receipt_verify(*, receipt: Receipt) -> Verification:
    """This receipt, its run, and its place in the chain up to the checkpoint that anchors it."""
    made_at = witness._iso(timezone.now())  # before the head is read: see chain.verify_checkpoints
    keys = signing.verifying_keys()
    head_seq = Receipt.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    lines, bad = witness.witness_file_checkpoints()
    problems = [Problem("witness", "witness file", reason) for reason in bad]
    witnessed = sorted((d for d in lines if is_int(d.get("seq"))), key=_seq)
    after = [d for d in witnessed if d["seq"] >= receipt.seq]
    stored_after = (p.document() for p in ReceiptCheckpoint.objects.filter(seq__gte=receipt.seq).order_by("seq")
                    .iterator(chunk_size=20))
    anchor, where = _first_signed(after, keys=keys), "witness"
    if anchor is None:
        anchor, where = _first_signed(stored_after, keys=keys), "checkpoints"
    upto = anchor["seq"] if anchor else max(head_seq, receipt.seq)

    # Every checkpoint inside the walk, from either place, must match it too; the newest of each
    # place is held against the chain as it is (a later head the chain lacks is a cut-off tail).
    inside = {"witness": [d for d in after if d["seq"] <= upto],
              "checkpoints": [p.document() for p in ReceiptCheckpoint.objects.filter(seq__gte=receipt.seq,
                                                                                     seq__lte=upto).order_by("seq")]}
    inside["checkpoints"] = _not_sent(inside["checkpoints"], inside["witness"])
    newest_stored = ReceiptCheckpoint.objects.order_by("-seq").first()
    newest = {"witness": [witnessed[-1]] if witnessed else [],
              "checkpoints": [newest_stored.document()] if newest_stored else []}
    newest = {check: [d for d in found if not receipt.seq <= d["seq"] <= upto] for check, found in newest.items()}
    wanted = {d["seq"] for found in (*inside.values(), *newest.values()) for d in found}

    start = max(1, receipt.seq - 1)  # from the receipt before it: the link back is checked too
    start_prev = (Receipt.objects.filter(seq=start).values_list("prev_hash", flat=True).first() or GENESIS
                  if start < receipt.seq else receipt.prev_hash)
    legacy: list = []
    walked, _last, _head, chain_problems, hashes = _walk(keys=keys, from_seq=start, start_prev=start_prev,
                                                         upto_seq=upto, want_hashes=wanted, legacy=legacy)
    missing = [seq for seq in wanted if seq not in hashes]
    hashes.update(dict(Receipt.objects.filter(seq__in=missing).values_list("seq", "hash")))
    # A receipt shaped as from before signing, past the first checkpoint of either place, was not.
    firsts = [witnessed[0]["seq"]] if witnessed else []
    firsts += ReceiptCheckpoint.objects.order_by("seq").values_list("seq", flat=True)[:1]
    chain_problems += legacy_late(legacy, firsts)
    problems = chain_problems + problems
    problems += _checkpoint_problems(inside, keys=keys, hash_at=hashes, head_seq=head_seq, made_at=None,
                                     first_seq=receipt.seq, last_seq=upto, complete=False)
    problems += _checkpoint_problems(newest, keys=keys, hash_at=hashes, head_seq=head_seq, made_at=made_at)
    problems += cross_check([_record_of(receipt)])
    problems += whole_chain_problems()
    if anchor is not None and (chain_problems or hashes.get(anchor["seq"]) != anchor["head"]):
        anchor = None  # a broken link on the way, or signed over another chain: reported, and nothing anchored
    if anchor is not None:
        ok = (f"receipt #{receipt.seq} signed, its run, trace and approvals match, and it chains to the "
              f"{WHERE[where]} checkpoint at #{anchor['seq']} ({walked} receipt(s) walked)")
    else:
        ok = (f"receipt #{receipt.seq} signed, its run, trace and approvals match, and it chains to the head "
              f"#{upto} ({walked} receipt(s) walked); not yet anchored: no signed checkpoint at or after it yet")
    result = _result(walked, problems, ok_reason=ok)
    return replace(result, anchor=(anchor["seq"], WHERE[where]) if anchor is not None else None)
