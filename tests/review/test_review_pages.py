"""The workbench's review queue and review page: who sees them, what the page shows side by side,
and its forms going through review.records."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from review.models import ReviewItem, ReviewRecord, SamplingRule
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


def _signed_in(username):
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def test_queue_and_review_page_assign_and_seal_records(operator):
    SamplingRule.objects.create(name="blocked", always=["blocked"])
    run = start(operator, "What is Dana Whitfield's salary?")
    item = ReviewItem.objects.get(run_id=run["id"])
    page = _signed_in("compliance")
    queue = page.get("/admin/review/reviewitem/")
    assert queue.status_code == 200 and "blocked: blocked" in queue.content.decode()
    url = f"/admin/review/reviewitem/{item.pk}/change/"
    shown = page.get(url).content.decode()
    for part in ('id="review-receipt"', 'id="review-trace"', 'id="review-verification"', "VALID", "intent_guard"):
        assert part in shown, part
    assert '<option value="compliance"' in shown and '<option value="operator"' not in shown  # the caller is not offered
    assert "Only the assignee submits records." in shown
    page.post(url, {"assign": "1", "assignee": "compliance"})
    assert ReviewItem.objects.get(pk=item.pk).assignee.username == "compliance"
    page.post(url, {"kind": "finding", "severity": "high", "note": "guard matched late"})
    page.post(url, {"kind": "sign_off", "note": ""})  # refused: a finding is open; said on the page
    follow = page.post(url, {"kind": "follow_up", "note": "guard moved first", "resolves": "on"}, follow=True)
    assert [r.kind for r in ReviewRecord.objects.order_by("seq")] == ["finding", "follow_up"]
    text = follow.content.decode()
    assert "sealed into the review chain" in text and "guard matched late" in text and "Resolved" in text
    assert "all 2 review records signed and chained" in text
    assert page.get("/admin/").content.decode().count('id="review-links"') == 1


def test_callers_see_no_review_pages(operator):
    SamplingRule.objects.create(name="all", percentage=100)
    item = ReviewItem.objects.get(run_id=start(operator, "What is Dana Whitfield's salary?")["id"])
    page = _signed_in("operator")
    assert page.get("/admin/review/reviewitem/").status_code in (302, 403)
    assert page.get(f"/admin/review/reviewitem/{item.pk}/change/").status_code in (302, 403)
    assert page.post(f"/admin/review/reviewitem/{item.pk}/change/", {"assign": "1", "assignee": "compliance"}
                     ).status_code in (302, 403)
    assert ReviewItem.objects.get(pk=item.pk).assignee is None
    assert page.get("/admin/review/samplingrule/").status_code in (302, 403)
    staff = get_user_model().objects.get(username="approver")  # staff, in secops only
    assert staff.is_staff
    page = _signed_in("approver")
    assert page.get("/admin/review/reviewitem/").status_code == 403
    assert page.get(f"/admin/review/reviewitem/{item.pk}/change/").status_code in (302, 403)
