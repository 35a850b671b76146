"""The signed record chains in an evidence bundle: reviews.jsonl and trust.jsonl (every record, #1
to the head, as the database holds them now) and the manifest's signed account of each. runs.evidence
writes them (review.apps registers these with it: runs imports no app above it);
warrant_verify.review_chain and warrant_verify.trust_chain check them offline with the same code the
server uses."""

from agents.models import TrustChange
from review.models import ReviewRecord
from review.trust_chain import COLUMNS as TRUST_COLUMNS
from review.verification import COLUMNS, record_of
from warrant_verify.messages import GENESIS

CHUNK = 2000


def _chain_rows(queryset, columns, line):
    """(rows, summary): a chain's lines in seq order, and after they are written, what the manifest says of them."""
    seen = {"count": 0, "head_seq": 0, "head_hash": GENESIS}

    def rows():
        for row in queryset.order_by("seq").values(*columns).iterator(chunk_size=CHUNK):
            record = line(row)
            seen.update(count=seen["count"] + 1, head_seq=record["seq"], head_hash=record["hash"])
            yield record

    return rows(), lambda: dict(seen)


def review_chain_rows():
    return _chain_rows(ReviewRecord.objects.all(), COLUMNS, record_of)


def trust_chain_rows():
    return _chain_rows(TrustChange.objects.all(), TRUST_COLUMNS, dict)
