"""Is every run the rules sample in the queue? The draw is deterministic, so the rules can be
evaluated again on any sealed receipt: a run they sample that has no review item was missed (the
hook failed) or had its item removed, which hides a run from review.

A rule counts for receipts sealed after its last change (updated_at): an earlier run was judged
by the rule as it was then, which is not kept.
"""

import json
from dataclasses import dataclass

from django.db.models import Min

from review.models import ReviewItem, SamplingRule
from review.sampling import reasons_for, sample_sealed
from runs.models import Receipt

CHUNK = 500


@dataclass(frozen=True)
class Gap:
    run_id: str
    receipt_seq: int
    reasons: list


def sampling_gaps(*, limit: int = 1000) -> list[Gap]:
    """Sealed runs today's enabled rules sample and that have no review item, oldest first."""
    rules = list(SamplingRule.objects.filter(enabled=True).order_by("name", "id"))
    if not rules:
        return []
    since = SamplingRule.objects.filter(enabled=True).aggregate(first=Min("updated_at"))["first"]
    receipts = (Receipt.objects.filter(created_at__gte=since, review_item__isnull=True).select_related("run")
                .order_by("seq"))
    gaps: list[Gap] = []
    for receipt in receipts.iterator(chunk_size=CHUNK):
        applicable = [r for r in rules if r.updated_at <= receipt.created_at
                      and (r.agent_id is None or r.agent_id == receipt.run.agent_id)]
        reasons = reasons_for(receipt.run, json.loads(receipt.body), applicable) if applicable else []
        if reasons:
            gaps.append(Gap(str(receipt.run_id), receipt.seq, reasons))
            if len(gaps) >= limit:
                break
    return gaps


def fill_gaps(gaps: list[Gap]) -> int:
    """Sample each missed run now, with the reasons found; the count written."""
    written = 0
    for gap in gaps:
        receipt = Receipt.objects.select_related("run").get(run_id=gap.run_id)
        if not ReviewItem.objects.filter(run_id=gap.run_id).exists():
            written += sample_sealed(run=receipt.run, receipt=receipt, body=json.loads(receipt.body)) is not None
    return written
