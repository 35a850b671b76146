"""The review chain's head, given to the same witness sinks as the receipts' (runs.witness).

The records are signed with the receipt key, so whoever holds that key could rewrite the review
chain consistently, hashes and signatures included, and every check inside the database would
pass. The witness keeps what they cannot rewrite: a signed head of the review chain each time it
grows, outside the database. review.verification and the offline verifier hold the chain against
those heads. review.apps registers REVIEW_CHAIN with runs.witness, which catches sinks up (the
reconciler) and reports them (/readyz) without importing this app.
"""

from functools import partial

from django.db import transaction

from review.models import ReviewRecord
from runs import witness
from warrant_verify.messages import GENESIS
from warrant_verify.review_chain import REVIEW_CHECKPOINT_KIND, review_checkpoint_message


def review_head() -> tuple[int, str]:
    return ReviewRecord.objects.order_by("-seq").values_list("seq", "hash").first() or (0, GENESIS)


def _made_at(seq: int):
    return ReviewRecord.objects.filter(seq=seq).values_list("created_at", flat=True).first()


REVIEW_CHAIN = witness.WitnessedChain(name="review", kind=REVIEW_CHECKPOINT_KIND, message=review_checkpoint_message,
                                      head=review_head, made_at=_made_at)


def _publish(chain: witness.WitnessedChain, seq: int, hash_: str) -> None:
    witness.chain_publish(chain, head=(seq, hash_))


def witness_after_commit(seq: int, hash_: str, chain: witness.WitnessedChain = REVIEW_CHAIN) -> None:
    """Called inside the transaction that appends record #seq (of the review chain, or of `chain`):
    once it commits, the sinks get the new head. A sink that is down never holds the writer up (the
    reconciler catches it up)."""
    transaction.on_commit(partial(_publish, chain, seq, hash_), robust=True)
