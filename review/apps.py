from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Compliance review: the dashboard; sampling rules evaluated as receipts are sealed, the review
    queue, and the signed chain of review records."""

    name = "review"

    def ready(self) -> None:
        from governance.checks import TRIGGERS_MADE_BY
        from review import append_only
        from review.evidence import review_chain_rows
        from review.sampling import sample_sealed
        from review.witness import REVIEW_CHAIN
        from runs import evidence, witness
        from runs.receipts import receipt_sealed

        receipt_sealed.connect(sample_sealed, dispatch_uid="review.sampling")
        evidence.REVIEW_CHAIN[:] = [review_chain_rows]  # every bundle carries the review chain
        witness.OTHER_CHAINS[:] = [REVIEW_CHAIN]  # the witness sinks are given its head too
        TRIGGERS_MADE_BY.append((append_only, ("review", "0001_compliance_review")))  # W036 watches them
