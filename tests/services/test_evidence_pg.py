"""The insider's tampering on PostgreSQL: the same attacks as tests/evidence/test_tamper.py, by a
database superuser on a connection of their own (`session_replication_role = replica` switches
the append-only triggers off for it), each caught by verify_receipts and the API.

Run alone with its own database and no worker (runs are advanced in the test):
DATABASE_URL=postgres://postgres@127.0.0.1:5432/warrant_evidence CELERY_BROKER_URL=redis://127.0.0.1:1/0 \
  .venv/bin/pytest tests/services/test_evidence_pg.py
"""

import pytest
from django.db import connection

from tests.evidence.test_tamper import (  # noqa: F401  (the fixtures and tests, collected again here)
    history,
    test_a_middle_body_edited_and_every_later_hash_recomputed,
    test_a_middle_body_rewritten_by_the_key_holder_is_caught_by_the_witness,
    test_a_middle_receipt_deleted_the_rest_renumbered_and_rehashed,
    test_a_receipt_forged_for_a_run_that_had_none,
    test_a_witness_silenced_in_the_database_still_gets_the_next_head,
    test_decided_by_changed_in_the_approval_row,
    test_decided_by_changed_in_the_receipt_body,
    test_run_events_blanked,
    test_run_events_deleted,
    test_the_approvers_reason_changed_in_the_approval_row,
    test_the_last_body_edited_and_its_hash_recomputed,
    test_the_last_body_edited_its_hash_recomputed_and_its_signature_blanked,
    test_the_key_holder_who_also_signs_new_database_checkpoints_is_caught_by_the_witness,
    test_the_last_receipt_deleted,
    test_the_runs_row_edited,
    test_the_whole_chain_rewritten_from_the_first_with_the_checkpoints_deleted,
    test_two_receipts_swapped_and_rechained,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_postgresql_refuses_changes_to_checkpoints_too(history):  # noqa: F811  (the fixture)
    from django.db import DatabaseError, transaction

    assert connection.vendor == "postgresql"
    for statement in ("UPDATE runs_receiptcheckpoint SET head = head", "DELETE FROM runs_receiptcheckpoint",
                      "TRUNCATE runs_receiptcheckpoint"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
