"""The review chain in the evidence bundle, checked by the offline verifier: intact it passes,
and an edited, removed or forged review record fails naming reviews.jsonl."""

import json

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from review.models import ReviewItem, SamplingRule
from review.records import review_assign, review_submit
from runs import services, signing
from runs.evidence import evidence_bundle_write
from tests.runs.helpers import start
from warrant_verify.archive import read_bundle
from warrant_verify.bundle import verify_bundle
from warrant_verify.chain import check_receipt
from warrant_verify.review_chain import REVIEW_FILE, check_review_record

pytestmark = pytest.mark.django_db(transaction=True)


def sealed(operator, text: str) -> str:
    """A run asked for over the API and sealed: its id. Without eager tasks (tests/services on
    PostgreSQL run no worker) the test advances it itself."""
    run_id = start(operator, text)["id"]
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        services.run_advance(run_id=run_id)
    return run_id


def finding_and_follow_up(operator):
    """A sampled run reviewed by compliance: a finding (#1) and the follow-up that resolves it (#2)."""
    compliance = get_user_model().objects.get(username="compliance")
    SamplingRule.objects.create(name="all", percentage=100)
    item = ReviewItem.objects.get(run_id=sealed(operator, "What is Dana Whitfield's salary?"))
    review_assign(item=item, assignee=compliance, by=compliance)
    review_submit(item=item, reviewer=compliance, kind="finding", severity="high", note="the guard fired late")
    review_submit(item=item, reviewer=compliance, kind="follow_up", note="moved it first", resolves=True)
    return compliance


@pytest.fixture
def bundle(operator, tmp_path):
    evidence_bundle_write(out_dir=tmp_path / "b", requested_by=finding_and_follow_up(operator))
    return tmp_path / "b"


def _check(path):
    return verify_bundle(read_bundle(path), trusted=signing.key_set())


def _rewrite(path, change):
    lines = (path / REVIEW_FILE).read_text().splitlines()
    (path / REVIEW_FILE).write_text("".join(line + "\n" for line in change(lines)))


def test_an_intact_bundle_carries_and_verifies_the_review_chain(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    lines = [json.loads(line) for line in (bundle / REVIEW_FILE).read_text().splitlines()]
    assert [r["seq"] for r in lines] == [1, 2] and manifest["reviews"]["head_hash"] == lines[-1]["hash"]
    report = _check(bundle)
    assert report.failures == [] and "2 review records (#1-#2)" in report.notes


def test_an_edited_record_fails_on_its_digest_and_its_hash(bundle):
    _rewrite(bundle, lambda lines: [lines[0].replace("the guard fired late", "all fine"), lines[1]])
    failures = [str(f) for f in _check(bundle).failures]
    assert any(f.startswith("reviews.jsonl: file: sha256 differs") for f in failures), failures
    assert any(f.startswith("reviews.jsonl: seq 1: hash is not sha256") for f in failures), failures


def test_a_removed_last_record_fails_against_the_signed_manifest(bundle):
    _rewrite(bundle, lambda lines: lines[:1])
    failures = [str(f) for f in _check(bundle).failures]
    assert any("review records were cut off, added or rewritten" in f for f in failures), failures


def test_review_and_receipt_signatures_cannot_stand_for_each_other(bundle):
    keys = signing.key_set()
    review = json.loads((bundle / REVIEW_FILE).read_text().splitlines()[0])
    receipt = json.loads((bundle / "receipts.jsonl").read_text().splitlines()[-1])
    assert check_review_record(review, keys) == [] and check_receipt(receipt, keys) == []
    as_receipt = review | {"signature": receipt["signature"]}
    assert any("signature" in p for p in check_review_record(as_receipt, keys))
    assert any("signature" in p for p in check_receipt(receipt | {"signature": review["signature"]}, keys))
