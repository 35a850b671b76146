from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Compliance review: the dashboard; sampling rules evaluated as receipts are sealed, the review
    queue, and the signed chains of review records and of trust changes."""

    name = "review"

    def ready(self) -> None:
        from agents import trust
        from governance.checks import TRIGGERS_MADE_BY
        from review import append_only
        from review.evidence import review_chain_rows, trust_chain_rows
        from review.sampling import sample_sealed
        from review.trust_chain import TRUST_CHAIN, seal_trust_change
        from review.witness import REVIEW_CHAIN
        from runs import evidence, witness
        from runs.receipts import receipt_sealed
        from warrant_verify.review_chain import REVIEW
        from warrant_verify.trust_chain import TRUST

        receipt_sealed.connect(sample_sealed, dispatch_uid="review.sampling")
        # every bundle carries both chains: (file, the manifest's section, rows and summary)
        evidence.RECORD_CHAINS[:] = [(REVIEW.file, REVIEW.section, review_chain_rows),
                                     (TRUST.file, TRUST.section, trust_chain_rows)]
        witness.OTHER_CHAINS[:] = [REVIEW_CHAIN, TRUST_CHAIN]  # the witness sinks are given their heads too
        trust.SEAL[:] = [seal_trust_change]  # every trust change is sealed into the trust chain
        TRIGGERS_MADE_BY.append((append_only, ("review", "0001_compliance_review")))  # W036 watches them
