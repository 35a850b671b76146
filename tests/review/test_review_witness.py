"""The review chain's head goes to the witness, and the review chain is held against it.

The attacker here holds the signing key and the database (a DBA with the platform's key): they
rewrite a review record, rehash and re-sign the chain behind the append-only triggers, so every
check inside the database passes. Only the witness file, outside the database, still disagrees:
online verification (GET review/verify/, manage.py review_check) and the offline verifier over a
bundle (with --witness, and from the bundle's own checkpoints.jsonl) say so. Cutting records off
the end is caught the same way.
"""

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection

from review import append_only
from review.models import ReviewItem, ReviewRecord, SamplingRule
from review.records import review_assign, review_submit
from review.verification import review_verify_chain
from runs import signing
from runs.evidence import evidence_bundle_write
from runs.models import WitnessSink
from runs.witness import witness_catch_up, witness_status
from tests.review.test_review_evidence import finding_and_follow_up, sealed
from warrant_verify.__main__ import main as verify_main
from warrant_verify.jcs import canonicalize
from warrant_verify.messages import GENESIS, receipt_hash
from warrant_verify.review_chain import REVIEW_CHECKPOINT_KIND, review_message

pytestmark = pytest.mark.django_db(transaction=True)


def _uid(value) -> str:
    return str(value) if connection.vendor == "postgresql" else value.hex


def _as_dba(*statements) -> None:
    """Raw SQL with the review chain's append-only triggers out of the way, then back in place."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = replica")
            for sql, params in statements:
                cursor.execute(sql, params)
            cursor.execute("SET session_replication_role = DEFAULT")
        return
    append_only.TRIGGERS.drop(connection)
    try:
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
    finally:
        append_only.TRIGGERS.create(connection)


def _resign_from(seq: int, bodies: dict[int, str]) -> None:
    """The key holder's rewrite: new bodies, every later link rehashed and every signature remade."""
    previous = ReviewRecord.objects.filter(seq=seq - 1).values_list("hash", flat=True).first() or GENESIS
    statements = []
    for record in ReviewRecord.objects.filter(seq__gte=seq).order_by("seq"):
        body = bodies.get(record.seq, record.body)
        new = receipt_hash(previous, body)
        signature = signing.sign(review_message(seq=record.seq, prev_hash=previous, hash=new, key_id=record.key_id,
                                                record_id=str(record.id), run_id=str(record.run_id)))
        note = json.loads(body)["note"]
        statements.append(("UPDATE review_reviewrecord SET body = %s, prev_hash = %s, hash = %s, signature = %s, "
                           "note = %s WHERE id = %s", [body, previous, new, signature, note, _uid(record.id)]))
        previous = new
    _as_dba(*statements)


@pytest.fixture
def witnessed(operator, settings, tmp_path):
    """A sampled run with a finding and its follow-up, every head witnessed in the file."""
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0
    compliance = finding_and_follow_up(operator)
    return {"file": tmp_path / "witness.jsonl", "compliance": compliance, "tmp": tmp_path}


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _review_check() -> str:
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("review_check", stdout=out)
    assert "does not verify" in str(failed.value)
    return out.getvalue()


def _offline(witnessed, *, with_witness: bool) -> tuple[int, str]:
    """The offline verifier's exit status and output over a bundle made now."""
    bundle = witnessed["tmp"] / f"bundle-{with_witness}"
    evidence_bundle_write(out_dir=bundle, requested_by=witnessed["compliance"])
    keys = witnessed["tmp"] / "keys.json"
    keys.write_text(json.dumps(signing.key_set_document()))
    argv = [str(bundle), "--public-key", str(keys), "--workers", "1"]
    if with_witness:
        argv += ["--witness", str(witnessed["file"])]
    out = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(out):
        status = verify_main(argv)
    return status, out.getvalue()


def test_each_review_record_s_head_is_witnessed_and_everything_verifies(witnessed):
    reviews = [line for line in _lines(witnessed["file"]) if line["kind"] == REVIEW_CHECKPOINT_KIND]
    records = list(ReviewRecord.objects.order_by("seq").values_list("seq", "hash"))
    assert [(line["seq"], line["head"]) for line in reviews] == records and len(records) == 2
    assert WitnessSink.objects.get(name="review-file").delivered_seq == 2
    checked = review_verify_chain()
    assert checked.valid, checked.failures
    assert "match the witness's 2 review checkpoints" in checked.reason
    out = io.StringIO()
    call_command("review_check", stdout=out)
    assert "review witness file: #2 of #2 (current)" in out.getvalue()
    call_command("verify_receipts", stdout=io.StringIO())  # the receipts' check reads only its own lines
    status, out = _offline(witnessed, with_witness=True)
    assert status == 0, out
    assert "and 2 review checkpoints in witness.jsonl" in out and "and 2 review checkpoints in checkpoints.jsonl" in out


def test_a_review_record_rewritten_and_re_signed_by_the_key_holder_fails_against_the_witness(witnessed):
    first = ReviewRecord.objects.get(seq=1)
    body = json.loads(first.body)
    body["severity"], body["note"] = "high", "nothing was wrong"
    _resign_from(1, {1: canonicalize(body).decode()})
    checked = review_verify_chain()
    assert not checked.valid
    # Hashes, signatures and rows all agree with each other: only the witness disagrees.
    assert {p.check for p in checked.failures} == {"witness"}, checked.failures
    assert any("review checkpoint 1" in p.record and "rewritten after this checkpoint" in p.reason
               for p in checked.failures), checked.failures
    assert "rewritten after this checkpoint" in _review_check()

    compliance = _client(witnessed["compliance"])
    verdict = compliance.get("/api/v1/review/verify/").json()
    assert verdict["valid"] is False and "rewritten" in json.dumps(verdict)

    status, out = _offline(witnessed, with_witness=True)
    assert status == 1
    assert "witness.jsonl: review checkpoint 1: signed head for review record #1 differs" in out, out
    # The bundle's own copy of the witness's review checkpoints says the same without --witness.
    status, out = _offline(witnessed, with_witness=False)
    assert status == 1 and "checkpoints.jsonl: review checkpoint 2: signed head" in out, out


def test_review_records_cut_off_the_end_are_caught_by_the_witness(witnessed):
    _as_dba(("DELETE FROM review_reviewrecord WHERE seq = %s", [2]))
    checked = review_verify_chain()
    assert [p.check for p in checked.failures] == ["witness"], checked.failures
    assert "review records were cut off the end" in checked.failures[0].reason
    assert "cut off the end" in _review_check()
    status, out = _offline(witnessed, with_witness=True)
    assert status == 1 and "witness.jsonl: review checkpoint 2: review checkpoint at #2" in out, out


def test_a_sink_that_missed_review_records_is_caught_up_and_readyz_says_so(operator, settings, tmp_path, client):
    settings.WARRANT_WITNESS_FILE = ""  # no sink while the records are written
    compliance = get_user_model().objects.get(username="compliance")
    SamplingRule.objects.create(name="all", percentage=100)
    item = ReviewItem.objects.get(run_id=sealed(operator, "List all accounts."))
    review_assign(item=item, assignee=compliance, by=compliance)
    review_submit(item=item, reviewer=compliance, kind="sign_off")
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")

    review = witness_status()["review"]
    assert review["head_seq"] == 1 and review["sinks"]["file"]["behind_records"] == 1
    assert client.get("/readyz").json()["witness"]["review"]["sinks"]["file"]["delivered_seq"] == 0

    assert witness_catch_up()["review-file"] == "delivered #1"  # the reconciler's part
    status = witness_status()
    assert status["review"]["sinks"]["file"] | {"behind_seconds": 0} == {
        "ok": True, "delivered_seq": 1, "behind_records": 0, "behind_seconds": 0, "error": "", "failing_since": None}
    (line,) = [d for d in _lines(tmp_path / "witness.jsonl") if d["kind"] == REVIEW_CHECKPOINT_KIND]
    assert line["seq"] == 1 and line["head"] == ReviewRecord.objects.get().hash
    assert witness_catch_up()["review-file"] == "current"


def _client(user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(user)
    return api
