"""Sampling rules: every always-sample trigger, the percentage's deterministic draw, the rule's
scope, and the hook that writes the review item in the run's final transaction."""

import json
from types import SimpleNamespace

import pytest

from agents.models import Agent
from review import sampling
from review.models import ReviewItem, SamplingRule, Trigger
from runs.models import Run
from tests import factories
from tests.runs.helpers import start

RUN_ID = "3f6c1a52-9b1e-4c8e-a0d2-5e7f0c4b9a11"


def _run(**facts):
    state = {"model_calls": facts.pop("model_calls", [])}
    values = {"id": RUN_ID, "refused_count": 0, "refused_kinds": [], "taint_reason": "", "error_message": "",
              "snapshot": {"agent": {"model_profile": {"name": "main"}}}, "state": state} | facts
    return SimpleNamespace(**values)


def _body(**facts):
    return {"status": "succeeded", "stop_reason": None, "error": None, "tainted": False, "approvals": [],
            "tool_calls": []} | facts


def _rule(*always, percentage=0, tools=(), name="r", seed="s"):
    return SamplingRule(pk=1, name=name, always=list(always), tools=list(tools), percentage=percentage, seed=seed)


# Each trigger, a run that meets it, and the detail it records.
CASES = {
    Trigger.DENIAL: (_run(), _body(approvals=[{"tool": "send_email", "decision": "denied"}]), "denied: send_email"),
    Trigger.EXPIRY: (_run(), _body(approvals=[{"tool": "delete_account", "decision": "expired"}]),
                     "expired: delete_account"),
    Trigger.REFUSAL: (_run(refused_count=2, refused_kinds=["not_permitted"]), _body(), "2 refused (not_permitted)"),
    Trigger.TAINT: (_run(taint_reason="read a web page"), _body(tainted=True), "read a web page"),
    Trigger.FALLBACK: (_run(model_calls=[{"backend": "scripted", "profile": "backup"}]), _body(),
                       "1 call(s) answered by backup, not main"),
    Trigger.POLICY_ERROR: (_run(error_message="bad pattern"), _body(status="failed", error="policy_error"), "bad pattern"),
    Trigger.BUDGET_STOP: (_run(), _body(status="stopped", stop_reason="token_budget"), "stopped: token_budget"),
    Trigger.BLOCKED: (_run(), _body(status="blocked"), "blocked"),
    Trigger.FAILED: (_run(), _body(status="failed", error="internal"), "failed: internal"),
    Trigger.TOOL: (_run(), _body(tool_calls=[{"name": "crm_lookup"}, {"name": "send_email"}]), "called send_email"),
}


def test_every_trigger_has_a_case():
    assert set(CASES) == set(Trigger.values)


@pytest.mark.parametrize("trigger", list(Trigger.values))
def test_each_trigger_samples_the_run_that_meets_it_and_no_plain_run(trigger):
    run, body, detail = CASES[trigger]
    rule = _rule(trigger, tools=["send_email"])
    assert sampling.reasons_for(run, body, [rule]) == [{"rule": "r", "rule_id": 1, "reason": trigger, "detail": detail}]
    assert sampling.reasons_for(_run(), _body(), [rule]) == []


def test_a_rule_names_every_trigger_a_run_meets():
    run = _run(refused_count=1, refused_kinds=["denied"], taint_reason="web")
    body = _body(tainted=True, approvals=[{"tool": "send_email", "decision": "denied"}])
    reasons = sampling.reasons_for(run, body, [_rule(*Trigger.values, tools=["x"])])
    assert [r["reason"] for r in reasons] == ["denial", "refusal", "taint"]


def test_the_percentage_draw_is_deterministic_and_close_to_the_share():
    ids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(4000)]
    first = [sampling.drawn("seed-a", i, "12.50") for i in ids]
    assert first == [sampling.drawn("seed-a", i, "12.50") for i in ids]  # the same every time
    assert 400 <= sum(first) <= 600  # 12.5 % of 4000 = 500
    assert sum(sampling.drawn("seed-b", i, "12.50") for i in ids) != sum(first) or first != [
        sampling.drawn("seed-b", i, "12.50") for i in ids]  # another seed, another sample
    assert not any(sampling.drawn("seed-a", i, 0) for i in ids) and all(sampling.drawn("seed-a", i, 100) for i in ids)


def test_the_draw_is_the_documented_digest():
    import hashlib

    expected = int(hashlib.sha256(f"s:{RUN_ID}".encode()).hexdigest()[:16], 16)
    assert sampling.draw("s", RUN_ID) == expected
    share = expected / 2**64 * 100
    assert sampling.drawn("s", RUN_ID, f"{share + 0.01:.2f}") and not sampling.drawn("s", RUN_ID, f"{share - 0.01:.2f}")
    reason = sampling.reasons_for(_run(), _body(), [_rule(percentage=100)])[0]
    assert reason["reason"] == "percentage" and reason["detail"].startswith(f"draw {expected / 2**64:.6f} < 1.0000")


@pytest.mark.django_db(transaction=True)
def test_a_sealed_run_is_sampled_in_its_final_transaction_with_its_reasons(operator):
    agent = Agent.objects.get(slug="crm-assistant")
    SamplingRule.objects.create(name="blocked-anywhere", always=[Trigger.BLOCKED])
    SamplingRule.objects.create(name="crm-scores", agent=agent, always=[Trigger.TOOL], tools=["compute_health_score"])
    SamplingRule.objects.create(name="off", always=[Trigger.BLOCKED, Trigger.TOOL], tools=["get_account"],
                                percentage=100, enabled=False)
    blocked = start(operator, "What is Dana Whitfield's salary?")
    item = ReviewItem.objects.get(run_id=blocked["id"])
    assert item.receipt == Run.objects.get(id=blocked["id"]).receipt and item.state == "unassigned"
    assert [(r["rule"], r["reason"]) for r in item.reasons] == [("blocked-anywhere", "blocked")]
    answered = start(operator, "How healthy is Acme Corp?")
    assert [(r["rule"], r["detail"]) for r in ReviewItem.objects.get(run_id=answered["id"]).reasons] == [
        ("crm-scores", "called compute_health_score")]
    other = factories.agent("elsewhere")
    SamplingRule.objects.filter(name="crm-scores").update(agent=other)
    again = start(operator, "How healthy is Acme Corp?")
    assert not ReviewItem.objects.filter(run_id=again["id"]).exists()  # the rule is another agent's now


@pytest.mark.django_db(transaction=True)
def test_without_rules_nothing_is_sampled_and_resample_applies_a_later_rule(operator):
    run = start(operator, "What is Dana Whitfield's salary?")
    assert not ReviewItem.objects.exists()
    SamplingRule.objects.create(name="everything", percentage=100)
    item = sampling.resample(Run.objects.get(id=run["id"]))
    assert [r["reason"] for r in item.reasons] == ["percentage"]
    assert sampling.resample(Run.objects.get(id=run["id"])) is None  # sampled once


@pytest.mark.django_db(transaction=True)
def test_a_run_no_rule_samples_costs_one_statement_and_a_sampled_one_its_item(operator):
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    SamplingRule.objects.create(name="blocks", always=[Trigger.BLOCKED])
    answered = Run.objects.get(id=start(operator, "How healthy is Acme Corp?")["id"])
    body = json.loads(answered.receipt.body)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        assert sampling.sample_sealed(run=answered, receipt=answered.receipt, body=body) is None
    assert len(queries.captured_queries) == 1
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        item = sampling.sample_sealed(run=answered, receipt=answered.receipt, body=body | {"status": "blocked"})
    assert item.reasons[0]["reason"] == "blocked" and len(queries.captured_queries) <= 4  # rules, savepoint, insert, release


@pytest.mark.django_db(transaction=True)
def test_the_rules_are_read_before_the_receipt_chain_is_locked_and_the_item_refers_to_the_receipt(operator):
    """The chain's lock is held from its statement to the commit, so whatever the sampling hook
    reads there keeps every other run's end waiting: it reads the rules first. The item is
    inserted before its receipt, in the same transaction, and refers to it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    SamplingRule.objects.create(name="scores", always=[Trigger.TOOL], tools=["compute_health_score"])
    with CaptureQueriesContext(connection) as queries:
        answered = start(operator, "How healthy is Acme Corp?")
    sql = [q["sql"] for q in queries.captured_queries]
    rules = next(i for i, s in enumerate(sql) if "review_samplingrule" in s)
    chain = [i for i, s in enumerate(sql) if "pg_advisory_xact_lock" in s or s.startswith('INSERT INTO "runs_receipt"')]
    assert chain and rules < min(chain), sql[rules - 3:rules + 3]
    item = ReviewItem.objects.get(run_id=answered["id"])
    assert item.receipt == Run.objects.get(id=answered["id"]).receipt and item.receipt.seq >= 1
