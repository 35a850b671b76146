"""/api/v1/review/...: rules, queue, assignment, records and the chain's verification, as
compliance works them; refusals in the one error body."""

import pytest

from review.models import ReviewItem
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)
API = "/api/v1/review/"


def test_a_compliance_officer_samples_assigns_reviews_and_verifies(operator, compliance, admin):
    made = compliance.post(f"{API}rules/", {"name": "blocked", "always": ["blocked"], "percentage": 0,
                                            "note": "every block is read"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["created_by"] == "compliance" and len(made.json()["seed"]) == 32
    run = start(operator, "What is Dana Whitfield's salary?")
    start(operator, "How healthy is Acme Corp?")  # not blocked: not sampled
    queue = compliance.get(f"{API}queue/").json()
    assert [i["run"] for i in queue["results"]] == [run["id"]]
    item = queue["results"][0]
    assert item["reasons"][0]["reason"] == "blocked" and item["review_state"] == "unassigned"
    assert item["caller"] == "operator"

    refused = compliance.post(f"{API}items/{item['id']}/assign/", {"assignee": "operator"}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid"
    assert refused.json()["error"]["details"] == {"assignee": ["reviewers are members of the compliance role"]}
    unknown = compliance.post(f"{API}items/{item['id']}/assign/", {"assignee": "nobody-at-all"}, format="json")
    assert unknown.json()["error"]["details"] == {"assignee": ["no user named 'nobody-at-all'"]}
    assigned = compliance.post(f"{API}items/{item['id']}/assign/", {"assignee": "compliance"}, format="json")
    assert assigned.status_code == 200 and assigned.json()["assignee"] == "compliance"

    not_theirs = admin.post(f"{API}items/{item['id']}/records/", {"record_kind": "sign_off"}, format="json")
    assert not_theirs.status_code == 403 and not_theirs.json()["error"]["code"] == "forbidden"
    bad = compliance.post(f"{API}items/{item['id']}/records/", {"record_kind": "verdict"}, format="json")
    assert bad.status_code == 400
    no_severity = compliance.post(f"{API}items/{item['id']}/records/", {"record_kind": "finding", "note": "x"},
                                  format="json")
    assert no_severity.status_code == 400 and list(no_severity.json()["error"]["details"]) == ["severity"]
    finding = compliance.post(f"{API}items/{item['id']}/records/",
                              {"record_kind": "finding", "severity": "low", "note": "guard wording is vague"},
                              format="json")
    assert finding.status_code == 201, finding.content
    assert finding.json()["seq"] == 1 and finding.json()["record_kind"] == "finding"
    closed = compliance.post(f"{API}items/{item['id']}/records/",
                             {"record_kind": "follow_up", "note": "wording fixed in policy v2", "resolves": True},
                             format="json")
    assert closed.status_code == 201 and closed.json()["follows"] == finding.json()["id"]
    again = compliance.post(f"{API}items/{item['id']}/assign/", {"assignee": None}, format="json")
    assert again.status_code == 409

    detail = compliance.get(f"{API}items/{item['id']}/").json()
    assert detail["review_state"] == "resolved" and [r["seq"] for r in detail["records"]] == [1, 2]
    assert detail["receipt_verification"]["valid"] is True
    checked = compliance.get(f"{API}verify/").json()
    assert checked == {"valid": True, "checked": 2, "reason": checked["reason"], "failures": []}
    assert compliance.get(f"{API}queue/", {"state": "resolved"}).json()["count"] == 1
    assert compliance.get(f"{API}queue/", {"state": "unassigned"}).json()["count"] == 0


def test_rules_are_checked_and_their_names_unique(compliance):
    assert compliance.post(f"{API}rules/", {"name": "t", "always": ["tool"]}, format="json").status_code == 400
    assert compliance.post(f"{API}rules/", {"name": "t", "always": ["nonsense"]}, format="json").status_code == 400
    assert compliance.post(f"{API}rules/", {"name": "t", "percentage": 101}, format="json").status_code == 400
    # Too many digits to round to hundredths at all (the fuzz drew it; it was a 500).
    huge = compliance.post(f"{API}rules/", {"name": "t", "percentage": 1.1786223122940552e+307}, format="json")
    assert huge.status_code == 400 and "percentage" in huge.json()["error"]["details"], huge.content
    assert compliance.post(f"{API}rules/", {"name": "t", "seed": "mine"}, format="json").status_code == 400
    made = compliance.post(f"{API}rules/", {"name": "t", "always": ["tool"], "tools": ["send_email"]}, format="json")
    assert made.status_code == 201
    assert compliance.post(f"{API}rules/", {"name": "t"}, format="json").status_code == 409
    rule = made.json()["id"]
    assert compliance.patch(f"{API}rules/{rule}/", {"tools": []}, format="json").status_code == 400
    # Disabling and deleting are proposals a second person approves (tests/review/test_rule_proposals.py).
    assert compliance.patch(f"{API}rules/{rule}/", {"enabled": False}, format="json").status_code == 202
    assert compliance.delete(f"{API}rules/{rule}/").status_code == 202
    assert compliance.patch(f"{API}rules/{rule}/", {"name": "t-renamed"}, format="json").status_code == 200
    # Any number from 0 to 100 is a percentage; a finer one than hundredths is rounded, not refused.
    fine = compliance.post(f"{API}rules/", {"name": "fine", "percentage": 83.33988507717845}, format="json")
    assert fine.status_code == 201 and fine.json()["percentage"] == 83.34


def test_callers_and_approvers_see_no_review(operator, approver):
    for client in (operator, approver):
        answer = client.get(f"{API}queue/")
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "permission_denied"
    assert not ReviewItem.objects.exists()
