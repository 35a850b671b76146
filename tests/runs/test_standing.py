"""Standing approvals: matched and not matched, revoked mid-run, never for a tainted run, and
granted only within the granter's role's authority (runs.standing)."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from agents.models import SentEmail
from core.api_errors import Forbidden
from governance.models import Policy
from runs import services
from runs.models import ApprovalRequest, StandingApproval, StandingApprovalUse
from runs.outbox import side_effect_execute
from runs.standing import InvalidStanding, matches, pattern_problems, standing_grant, standing_revoke, standing_use
from runs.verification_receipt import receipt_verify
from tests import factories
from tests.runs.helpers import advance, events, run_script

pytestmark = pytest.mark.django_db

EMAIL = {"to": "dana.whitfield@example.com", "subject": "Renewal", "body": "Hello"}
EXACT = {name: {"equals": value} for name, value in EMAIL.items()}


# --- the pattern, pure ------------------------------------------------------------------------


def test_a_pattern_matches_exact_values_and_allow_lists():
    assert matches(EXACT, EMAIL)
    allowed = EXACT | {"subject": {"in": ["Renewal", "Welcome"]}}
    assert matches(allowed, EMAIL) and matches(allowed, EMAIL | {"subject": "Welcome"})
    assert not matches(allowed, EMAIL | {"subject": "Welcomes"})


@pytest.mark.parametrize("arguments", [
    EMAIL | {"to": "dana.whitfield@example.con"},   # one character different
    EMAIL | {"to": "Dana.whitfield@example.com"},   # case is a difference too
    EMAIL | {"to": "dana.whitfield@exаmple.com"},   # a Cyrillic a
    EMAIL | {"cc": "eve@example.com"},              # an argument the pattern does not mention
    {k: v for k, v in EMAIL.items() if k != "body"},  # one it mentions, missing
    None,
])
def test_anything_else_is_no_match(arguments):
    assert not matches(EXACT, arguments)


def test_values_compare_as_json_with_their_types():
    assert not matches({"n": {"equals": 1}}, {"n": True}) and not matches({"n": {"equals": 1}}, {"n": "1"})
    assert not matches({"n": {"equals": 1}}, {"n": 1.0}) and matches({"n": {"equals": [1, 2]}}, {"n": [1, 2]})


def test_a_pattern_that_could_match_no_valid_call_is_refused():
    schema = {"type": "object", "properties": {"to": {}, "subject": {}}, "required": ["to", "subject"],
              "additionalProperties": False}
    assert pattern_problems({"to": {"equals": "a@b.c"}, "subject": {"in": ["x"]}}, schema) == {}
    assert set(pattern_problems({"to": {"equals": "a@b.c"}}, schema)) == {"subject"}
    assert set(pattern_problems({"to": {"equals": "a"}, "subject": {"in": []}, "cc": {"equals": 1}}, schema)) == {
        "subject", "cc"}
    assert set(pattern_problems({"to": {"like": "a%"}, "subject": {"in": ["x", "x"]}}, schema)) == {"to", "subject"}
    assert pattern_problems(["to"]) == {"": pattern_problems(["to"])[""]}


# --- granting: within the role's authority -------------------------------------------------------


def _grant(user="approver", **values):
    values = {"tool": "send_email", "agent": None, "arguments": EXACT, "role": "secops", "reason": "weekly renewals",
              "expires_at": timezone.now() + timedelta(days=7), "via": "session"} | values
    return standing_grant(user=User.objects.get(username=user) if isinstance(user, str) else user, **values)


def test_only_a_member_of_the_role_may_grant_and_only_for_what_its_policies_ask(demo):
    assert _grant().role.name == "secops"
    with pytest.raises(Forbidden, match="only members of 'secops'"):
        _grant("compliance")
    with pytest.raises(Forbidden, match="only members"):
        _grant("admin")  # a superuser too: a standing yes is a decision of the role's members
    with pytest.raises(Forbidden, match="outside the role's authority"):
        _grant(tool="list_open_tickets", arguments={"account_id": {"equals": "A-100"}})
    Policy.objects.filter(name="side-effects-need-secops").update(enabled=False)
    with pytest.raises(Forbidden, match="outside the role's authority"):
        _grant()


def test_the_period_is_bounded_and_the_pattern_and_reason_checked(demo):
    with pytest.raises(InvalidStanding, match="30 days at most"):
        _grant(expires_at=timezone.now() + timedelta(days=31))
    with pytest.raises(InvalidStanding, match="before it starts"):
        _grant(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(InvalidStanding, match="pattern") as refused:
        _grant(arguments={"to": {"equals": EMAIL["to"]}})
    assert set(refused.value.details["arguments"]) == {"subject", "body"}
    with pytest.raises(InvalidStanding, match="pattern") as refused:
        _grant(arguments=EXACT | {"to": {"in": [EMAIL["to"], "not an address"]}})
    assert "refuses 'not an address'" in refused.value.details["arguments"]["to"]
    with pytest.raises(InvalidStanding, match="reason"):
        _grant(reason="   ")


def test_a_quorum_policy_cannot_be_stood_in_for(demo):
    Policy.objects.filter(name="side-effects-need-secops").update(quorum=2)
    with pytest.raises(InvalidStanding, match="more than one approver"):
        _grant()


# --- at call time ----------------------------------------------------------------------------------


def _emails(*arguments) -> dict:
    return {"turns": [[{"name": "send_email", "arguments": a}] for a in arguments]}


def test_a_matching_call_runs_without_asking_and_the_trace_and_receipt_name_the_standing_approval(replay_agent):
    granted = _grant()
    run = run_script(_emails(EMAIL))
    assert run.status == "succeeded" and SentEmail.objects.count() == 1
    assert not ApprovalRequest.objects.filter(run=run).exists()
    [call] = [e for e in events(run.id, "tool_call") if e["name"] == "send_email"]
    assert events(run.id, "standing_approval_used") == [{
        "kind": "standing_approval_used", "standing_approval_id": str(granted.id), "tool": "send_email",
        "call_id": call["call_id"]}]
    assert call["standing_approval_id"] == str(granted.id) and call["approval_id"] is None and call["ok"]
    body = json.loads(run.receipt.body)
    assert [c.get("standing_approval_id") for c in body["tool_calls"]] == [str(granted.id)]
    assert body["standing_approvals"] == [{
        "id": str(granted.id), "tool": "send_email", "agent": None, "role": "secops", "granted_by": "approver",
        "granted_via": "session", "expires_at": granted.expires_at.isoformat().replace("+00:00", "Z"), "calls": 1}]
    assert StandingApproval.objects.get(id=granted.id).uses == 1
    verified = receipt_verify(receipt=run.receipt)
    assert verified.valid, verified.failures
    browser = Client()
    browser.force_login(User.objects.get(username="compliance"))
    timeline = browser.get(f"/admin/runs/run/{run.id}/change/").content.decode()
    assert f"standing approval {str(granted.id)[:8]}" in timeline


def test_one_character_different_asks_people(replay_agent):
    granted = _grant()
    run = run_script(_emails(EMAIL | {"to": "dana.whitfield@example.co"}))
    assert run.status == "awaiting_approval" and SentEmail.objects.count() == 0
    assert ApprovalRequest.objects.get(run=run).approver_role.name == "secops"
    assert not events(run.id, "standing_approval_used") and StandingApproval.objects.get(id=granted.id).uses == 0


def test_an_allow_list_covers_each_listed_value_and_an_agent_scope_binds(replay_agent):
    _grant(arguments=EXACT | {"subject": {"in": ["Renewal", "Welcome"]}}, agent="replayer")
    run = run_script(_emails(EMAIL, EMAIL | {"subject": "Welcome"}))
    assert run.status == "succeeded" and SentEmail.objects.count() == 2
    assert StandingApproval.objects.get().uses == 2  # two calls, two uses
    StandingApproval.objects.update(agent=factories.agent("other-agent"))
    assert run_script(_emails(EMAIL)).status == "awaiting_approval"


def test_a_step_delivered_again_counts_its_call_once(replay_agent, settings):
    """A worker looks the call up (counting it) and sends the email, then dies before its
    checkpoint; the redelivered step looks the same call up again: one use, one email."""
    granted = _grant()
    settings.WARRANT = settings.WARRANT | {"TIME_SLICE_SECONDS": 0}  # one step per delivery
    run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps(_emails(EMAIL)),
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)  # the model's turn; the side-effecting call waits for a step of its own
    run.refresh_from_db()
    [call] = run.state["pending"]
    policy = {"policy_id": Policy.objects.get(name="side-effects-need-secops").pk}
    assert standing_use(run=run, call=call, approver_role="secops", policy=policy).pk == granted.pk
    side_effect_execute(run_id=str(run.id), caller="operator", tool=run.snapshot["tools"]["send_email"], call=call,
                        approval_id=None)
    assert StandingApproval.objects.get(id=granted.id).uses == 1 and SentEmail.objects.count() == 1

    run = advance(run)  # the redelivered step, then the model's answer
    assert run.status == "succeeded" and SentEmail.objects.count() == 1
    assert StandingApproval.objects.get(id=granted.id).uses == 1
    assert list(StandingApprovalUse.objects.values_list("run_id", "call_id")) == [(run.id, call["id"])]
    assert [e["call_id"] for e in events(run.id, "standing_approval_used")] == [call["id"]]


def test_a_revocation_mid_run_takes_effect_at_the_next_call(replay_agent):
    granted = _grant()
    script = {"turns": [[{"name": "send_email", "arguments": EMAIL}],
                        [{"name": "delete_account", "arguments": {"account_id": "A-400"}}],
                        [{"name": "send_email", "arguments": EMAIL}]]}
    run = run_script(script)
    assert run.status == "awaiting_approval" and SentEmail.objects.count() == 1  # the first ran under it
    assert ApprovalRequest.objects.get(run=run, status="pending").tool == "delete_account"
    standing_revoke(standing_id=granted.id, user=User.objects.get(username="approver"), reason="stop")
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(approval_id=approval.id, user=User.objects.get(username="approver"), approve=True,
                             via="session")
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "awaiting_approval", "the same call again, after the revocation, waits for a person"
    assert ApprovalRequest.objects.get(run=run, status="pending").tool == "send_email"
    assert SentEmail.objects.count() == 1 and StandingApproval.objects.get(id=granted.id).uses == 1
    assert len(events(run.id, "standing_approval_used")) == 1


def test_an_expired_standing_approval_answers_nothing(replay_agent):
    granted = _grant()
    StandingApproval.objects.filter(id=granted.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert run_script(_emails(EMAIL)).status == "awaiting_approval"


def test_a_tainted_run_never_uses_one(replay_agent):
    granted = _grant()
    run = run_script({"turns": [[{"name": "list_open_tickets", "arguments": {"account_id": "A-100"}}],
                          [{"name": "send_email", "arguments": EMAIL}]]})
    assert run.tainted and run.status == "awaiting_approval" and SentEmail.objects.count() == 0
    assert not events(run.id, "standing_approval_used") and StandingApproval.objects.get(id=granted.id).uses == 0


def test_it_never_applies_to_the_granters_own_run(replay_agent):
    both = factories.user("both", roles=("operators", "secops"))
    _grant(both)
    assert run_script(_emails(EMAIL), user="both").status == "awaiting_approval"
    assert run_script(_emails(EMAIL)).status == "succeeded"  # someone else's run: it answers


def test_a_granter_who_left_the_role_no_longer_stands_behind_it(replay_agent):
    _grant()
    User.objects.get(username="approver").groups.remove(Group.objects.get(name="secops"))
    assert run_script(_emails(EMAIL)).status == "awaiting_approval"


def test_it_answers_only_a_policy_that_asks_its_own_role(replay_agent):
    legal = factories.user("counsel", roles=("legal",), staff=True)
    factories.policy("legal-reviews-email", type="tool_approval", target_tools=["send_email"], approver_role="legal",
                     priority=50)
    _grant(legal, role="legal")
    run = run_script(_emails(EMAIL))  # secops's policy (priority 10) asks first: a legal yes is no answer to it
    assert run.status == "awaiting_approval" and ApprovalRequest.objects.get(run=run).approver_role.name == "secops"


def test_a_policy_raised_to_a_quorum_after_the_grant_asks_people(replay_agent):
    _grant()
    Policy.objects.filter(name="side-effects-need-secops").update(quorum=2)
    assert run_script(_emails(EMAIL)).status == "awaiting_approval"


def test_an_eval_never_uses_one(replay_agent):
    from evals.models import EvalResult, GoldenCase
    from evals.runner import run_evals

    granted = _grant()
    GoldenCase.objects.create(agent=replay_agent, name="standing-email", input=json.dumps(_emails(EMAIL)),
                              roles=["operators"], expected_status="awaiting_approval", awaiting_tool="send_email")
    run_evals(agent_slug="replayer")
    result = EvalResult.objects.get(case_name="standing-email")
    assert result.passed and result.status == "awaiting_approval" and result.sandbox == []
    assert "standing_approval_used" not in [e["kind"] for e in result.trace]
    assert StandingApproval.objects.get(id=granted.id).uses == 0


@pytest.mark.parametrize("changed", [
    {"body": "Your card 4111 1111 1111 1111 is on file."},  # a card number on its way out
    {"to": "dana.whitfield@exаmple.com"},                   # an address that is not what it looks like
])
def test_a_secret_or_a_look_alike_address_asks_people_even_when_the_pattern_allows_it(replay_agent, changed):
    arguments = EMAIL | changed
    granted = _grant(arguments={name: {"equals": value} for name, value in arguments.items()})
    run = run_script(_emails(arguments))
    assert run.status == "awaiting_approval" and SentEmail.objects.count() == 0
    assert StandingApproval.objects.get(id=granted.id).uses == 0
