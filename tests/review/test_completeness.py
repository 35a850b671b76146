"""review_check: a sampled run whose review item is gone is found (and refilled), the chain's state
is reported, and the exit status says so."""

import pytest
from django.core.management import CommandError, call_command

from review.completeness import sampling_gaps
from review.models import ReviewItem, SamplingRule
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_removed_item_is_a_gap_and_fill_puts_it_back(operator, capsys):
    SamplingRule.objects.create(name="blocks", always=["blocked"])
    blocked = start(operator, "What is Dana Whitfield's salary?")
    start(operator, "How healthy is Acme Corp?")  # not sampled: never a gap
    call_command("review_check")
    assert "every run the rules sample is in the queue" in capsys.readouterr().out
    ReviewItem.objects.filter(run_id=blocked["id"]).delete()  # hidden from review
    assert [g.run_id for g in sampling_gaps()] == [blocked["id"]]
    with pytest.raises(CommandError, match="1 sampled run"):
        call_command("review_check")
    assert f"not in the queue: run {blocked['id']}" in capsys.readouterr().out
    call_command("review_check", "--fill")
    assert ReviewItem.objects.get(run_id=blocked["id"]).reasons[0]["reason"] == "blocked"
    assert sampling_gaps() == []


def test_a_rule_made_after_a_run_does_not_call_it_missed(operator):
    start(operator, "What is Dana Whitfield's salary?")
    SamplingRule.objects.create(name="blocks", always=["blocked"])
    assert sampling_gaps() == []
