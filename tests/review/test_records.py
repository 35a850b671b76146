"""Review records: who may be assigned, what may follow what, a chain that verifies, and rows
that cannot be changed (model, database triggers) or, once the triggers are dropped, whose change
the verification finds."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction

from core.api_errors import Conflict, DomainError, Forbidden
from review import append_only
from review.models import ReviewItem, ReviewRecord, SamplingRule
from review.records import review_assign, review_submit
from review.verification import review_verify_chain
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


def _user(name, *roles):
    user = User.objects.create_user(name, password="x")
    user.groups.add(*Group.objects.filter(name__in=roles))
    return user


@pytest.fixture
def item(operator):
    SamplingRule.objects.create(name="all", percentage=100)
    run = start(operator, "What is Dana Whitfield's salary?")
    return ReviewItem.objects.get(run_id=run["id"])


@pytest.fixture
def lead():
    return User.objects.get(username="compliance")


def test_sign_off_finding_and_follow_ups_chain_and_verify(item, lead):
    reviewer = _user("rev1", "compliance")
    review_assign(item=item, assignee=reviewer, by=lead)
    first = review_submit(item=item, reviewer=reviewer, kind="sign_off", note="block was right")
    item.refresh_from_db()
    assert item.state == "signed_off" and first.seq == 1
    with pytest.raises(Conflict):
        review_submit(item=item, reviewer=reviewer, kind="sign_off")
    finding = review_submit(item=item, reviewer=reviewer, kind="finding", severity="high", note="salary leaked in log")
    follow = review_submit(item=item, reviewer=reviewer, kind="follow_up", note="log rotated", resolves=True)
    item.refresh_from_db()
    assert item.state == "resolved" and follow.follows == finding and (finding.seq, follow.seq) == (2, 3)
    assert follow.prev_hash == finding.hash and finding.prev_hash == first.hash
    body = json.loads(follow.body)
    assert body["kind"] == "follow_up" and body["follows"] == str(finding.id) and body["resolves"] is True
    assert body["receipt"] == {"seq": item.receipt.seq, "hash": item.receipt.hash}
    assert body["verification"]["valid"] is True and body["reviewer"]["username"] == "rev1"
    assert body["sampled"] == [{"rule": "all", "reason": "percentage", "detail": item.reasons[0]["detail"]}]
    checked = review_verify_chain()
    assert checked.valid and checked.checked == 3, checked.failures


def test_what_a_record_needs(item, lead):
    reviewer = _user("rev2", "compliance")
    review_assign(item=item, assignee=reviewer, by=lead)
    for kind, values in [("finding", {"note": "x"}), ("finding", {"severity": "high"}), ("sign_off", {"severity": "low"}),
                         ("follow_up", {"note": "nothing open"}), ("verdict", {})]:
        with pytest.raises((DomainError, Conflict)):
            review_submit(item=item, reviewer=reviewer, kind=kind, **values)
    assert not ReviewRecord.objects.exists()
    with pytest.raises(Forbidden):  # only the assignee writes
        review_submit(item=item, reviewer=lead, kind="sign_off")


def test_never_the_caller_nor_an_approver_inside_the_run(operator, approver, lead):
    SamplingRule.objects.create(name="all", percentage=100)
    both = _user("caller-and-compliance", "operators", "compliance")
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(both)
    own = ReviewItem.objects.get(run_id=start(client, "What is Dana Whitfield's salary?")["id"])
    with pytest.raises(DomainError, match="caller"):
        review_assign(item=own, assignee=both, by=lead)
    decider = User.objects.get(username="approver")
    decider.groups.add(Group.objects.get(name="compliance"))
    run = start(operator, "Delete the account Initech.")
    assert approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/deny/", {"reason": "no"},
                         format="json").status_code == 200
    denied = ReviewItem.objects.get(run_id=run["id"])
    with pytest.raises(DomainError, match="approval"):
        review_assign(item=denied, assignee=decider, by=lead)
    with pytest.raises(DomainError, match="compliance"):
        review_assign(item=denied, assignee=User.objects.get(username="operator"), by=lead)
    with pytest.raises(Forbidden):
        review_assign(item=denied, assignee=lead, by=User.objects.get(username="operator"))
    review_assign(item=denied, assignee=both, by=lead)  # not this run's caller: eligible here
    assert ReviewItem.objects.get(pk=denied.pk).state == "assigned"


def _one_record(item, lead):
    reviewer = _user("rev3", "compliance")
    review_assign(item=item, assignee=reviewer, by=lead)
    return review_submit(item=item, reviewer=reviewer, kind="finding", severity="medium", note="original note")


def test_records_cannot_be_changed_or_removed(item, lead):
    record = _one_record(item, lead)
    record.note = "edited"
    with pytest.raises(ValidationError):
        record.save()
    with pytest.raises(ValidationError):
        record.delete()
    for statement in ("UPDATE review_reviewrecord SET note = 'edited'", "DELETE FROM review_reviewrecord"):
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    if connection.vendor == "postgresql":
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE review_reviewrecord CASCADE")
    assert ReviewRecord.objects.get().note == "original note" and append_only.missing(connection) == []


def _tamper(statement, *params):
    append_only.TRIGGERS.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
    append_only.TRIGGERS.create(connection)


@pytest.mark.parametrize("statement, check, words", [
    ("UPDATE review_reviewrecord SET note = 'nothing to see'", "review", "note differ"),
    ("UPDATE review_reviewrecord SET severity = 'low'", "review", "severity differ"),
    ("UPDATE review_reviewrecord SET body = replace(body, 'original note', 'nothing to see')", "review_chain",
     "hash is not sha256"),
    ("UPDATE review_reviewrecord SET seq = 7", "review_chain", "seq 7 where 1 was expected"),
    ("UPDATE review_reviewrecord SET signature = 'AAAA'", "signature", "signature"),
])
def test_a_change_behind_the_triggers_is_found(item, lead, statement, check, words):
    _one_record(item, lead)
    assert review_verify_chain().valid
    _tamper(statement)
    checked = review_verify_chain()
    assert not checked.valid
    assert any(p.check == check and words in p.reason for p in checked.failures), checked.failures


def test_a_rehashed_body_fails_its_signature_and_missing_triggers_are_reported(item, lead):
    from warrant_verify.messages import receipt_hash

    record = _one_record(item, lead)
    forged = record.body.replace("original note", "nothing to see")
    _tamper("UPDATE review_reviewrecord SET body = %s, hash = %s, note = %s", forged,
            receipt_hash(record.prev_hash, forged), "nothing to see")
    checked = review_verify_chain()
    assert [p.check for p in checked.failures] == ["signature"]
    append_only.TRIGGERS.drop(connection)
    try:
        assert "append_only" in {p.check for p in review_verify_chain().failures}
    finally:
        append_only.TRIGGERS.create(connection)
