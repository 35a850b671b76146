"""The review chain's witness and the receipts from before signing, on PostgreSQL: the tests of
tests/review/test_review_witness.py and tests/evidence/test_legacy_receipts.py collected again,
their DBA on a connection in `session_replication_role = replica`, runs advanced in the test (no
worker). Run as tests/services/test_evidence_pg.py says."""

import pytest

from tests.evidence.test_legacy_receipts import (  # noqa: F401  (the fixtures and tests, collected again here)
    test_a_legacy_receipt_edited_fails_on_its_hash,
    test_an_unsigned_receipt_after_a_signed_one_is_refused,
    test_every_signed_receipt_unsigned_is_refused_past_the_witness_s_first_checkpoint,
    test_legacy_receipts_before_the_first_signed_one_verify_and_are_stated,
    upgraded,
)
from tests.review.test_review_witness import (  # noqa: F401
    test_a_review_record_rewritten_and_re_signed_by_the_key_holder_fails_against_the_witness,
    test_a_sink_that_missed_review_records_is_caught_up_and_readyz_says_so,
    test_each_review_record_s_head_is_witnessed_and_everything_verifies,
    test_review_records_cut_off_the_end_are_caught_by_the_witness,
    witnessed,
)

pytestmark = pytest.mark.django_db(transaction=True)
