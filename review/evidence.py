"""The review chain in an evidence bundle: reviews.jsonl (every record, #1 to the head, as the
database holds them now) and the manifest's signed account of it. runs.evidence writes both
(review.apps registers this with it: runs imports no app above it); warrant_verify.review_chain
checks them offline with the same code the server uses."""

from review.models import ReviewRecord
from review.verification import COLUMNS, record_of
from warrant_verify.messages import GENESIS

CHUNK = 2000


def review_chain_rows():
    """(rows, summary): the lines of reviews.jsonl, and after they are written, what the manifest says of them."""
    seen = {"count": 0, "head_seq": 0, "head_hash": GENESIS}

    def rows():
        for row in ReviewRecord.objects.order_by("seq").values(*COLUMNS).iterator(chunk_size=CHUNK):
            record = record_of(row)
            seen.update(count=seen["count"] + 1, head_seq=record["seq"], head_hash=record["hash"])
            yield record

    return rows(), lambda: dict(seen)
