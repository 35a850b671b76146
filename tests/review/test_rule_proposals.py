"""Maker-checker for sampling rules (review.rules): one compliance member cannot make the review look
at fewer runs alone. A deletion, disabling, a lower percentage, a dropped trigger or tool, or a
narrower agent is a proposal the sampling ignores until a different compliance member or governance
admin approves; what only tightens applies at once."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.test import override_settings

from agents.models import Agent
from review import rules
from review.models import SamplingRule, SamplingRuleProposal
from tests import factories

pytestmark = pytest.mark.django_db

RULES, PROPOSALS = "/api/v1/review/rules/", "/api/v1/review/rule-proposals/"
AS_MADE = {"enabled": True, "percentage": Decimal("50.00"), "always": ["denial", "tool"], "tools": ["send_email"],
           "agent_id": None}


def _rule(**values) -> SamplingRule:
    return rules.rule_create({"name": "every-denial", "percentage": 50, "always": ["denial", "tool"],
                              "tools": ["send_email"]} | values, user=None)


def _state(rule) -> dict:
    rule = SamplingRule.objects.filter(pk=rule.pk).values(*AS_MADE).first()
    return rule and {k: (list(v) if isinstance(v, list) else v) for k, v in rule.items()}


def test_one_compliance_member_cannot_loosen_a_rule_alone_and_a_second_one_applies_it(compliance):
    rule = _rule()
    crm = Agent.objects.get(slug="crm-assistant").slug
    attempts = [("patch", {"enabled": False}), ("patch", {"percentage": 1}), ("patch", {"always": ["tool"]}),
                ("patch", {"tools": ["delete_account"]}), ("patch", {"agent": crm}), ("delete", None)]
    proposed = []
    for method, body in attempts:
        answer = getattr(compliance, method)(f"{RULES}{rule.pk}/", body, format="json")
        assert answer.status_code == 202, (body, answer.content)
        assert answer.json()["status"] == "pending" and answer.json()["proposed_by"] == "compliance"
        proposed.append(answer.json())
    assert [p["proposal_kind"] for p in proposed] == ["update"] * 5 + ["delete"]
    assert proposed[1]["changes"] == {"percentage": "1.00"}
    assert proposed[1]["loosens"] == ["lowers the percentage from 50.00 to 1.00"]
    assert proposed[4]["loosens"] == ["narrows it from every agent to crm-assistant"]
    # Nothing changed: the rule still samples what it did.
    assert _state(rule) == AS_MADE
    # The proposer approving (or refusing) their own proposal: 403, and nothing is written.
    for proposal in proposed:
        for verb in ("approve", "refuse"):
            mine = compliance.post(f"{PROPOSALS}{proposal['id']}/{verb}/")
            assert mine.status_code == 403 and mine.json()["error"]["code"] == "second_admin_required"
            assert "compliance proposed it" in mine.json()["error"]["message"]
    assert _state(rule) == AS_MADE
    assert set(SamplingRuleProposal.objects.values_list("status", flat=True)) == {"pending"}
    # A second compliance member approves the lower percentage: applied, and the proposal names both.
    second = factories.compliance_officer()
    approved = factories.api_client(second).post(f"{PROPOSALS}{proposed[1]['id']}/approve/")
    assert approved.status_code == 200, approved.content
    assert (approved.json()["status"], approved.json()["proposed_by"], approved.json()["decided_by"]) == (
        "approved", "compliance", second.username)
    assert _state(rule) == AS_MADE | {"percentage": Decimal("1.00")}
    # The others were made against the rule before that change: stale now; proposed again, a
    # governance admin (not a superuser) may approve the deletion too.
    stale = factories.api_client(second).post(f"{PROPOSALS}{proposed[5]['id']}/approve/")
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "proposal_stale")
    again = compliance.delete(f"{RULES}{rule.pk}/").json()
    deleted = factories.api_client(factories.governance_admin()).post(f"{PROPOSALS}{again['id']}/approve/")
    assert (deleted.status_code, deleted.json()["rule"]) == (200, None)
    assert _state(rule) is None
    assert SamplingRuleProposal.objects.get(pk=again["id"]).rule_name == "every-denial"


def test_who_may_confirm_a_loosening(compliance, operator, approver):
    rule = _rule()
    proposal = compliance.patch(f"{RULES}{rule.pk}/", {"enabled": False}, format="json").json()
    for client in (operator, approver):
        assert client.post(f"{PROPOSALS}{proposal['id']}/approve/").status_code == 403
    # An account the proposer set up in the workbench is the proposer's second pair of eyes.
    puppet = factories.compliance_officer()
    LogEntry.objects.create(user=get_user_model().objects.get(username="compliance"),
                            content_type=ContentType.objects.get_for_model(get_user_model()),
                            object_id=str(puppet.pk), object_repr=puppet.username, action_flag=ADDITION,
                            change_message="[]")
    refused = factories.api_client(puppet).post(f"{PROPOSALS}{proposal['id']}/approve/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "second_admin_required"
    assert "was set up" in refused.json()["error"]["message"]
    assert _state(rule) == AS_MADE
    # Another person refuses; only the proposer withdraws.
    other = factories.api_client(factories.compliance_officer())
    withdrawn_by_other = other.post(f"{PROPOSALS}{proposal['id']}/withdraw/")
    assert withdrawn_by_other.status_code == 403
    assert other.post(f"{PROPOSALS}{proposal['id']}/refuse/").json()["status"] == "refused"
    late = other.post(f"{PROPOSALS}{proposal['id']}/approve/")
    assert (late.status_code, late.json()["error"]["code"]) == (409, "proposal_decided")
    mine = compliance.delete(f"{RULES}{rule.pk}/").json()
    assert compliance.post(f"{PROPOSALS}{mine['id']}/withdraw/").json()["status"] == "withdrawn"
    assert _state(rule) == AS_MADE
    listed = compliance.get(PROPOSALS, {"status": "pending"}).json()
    assert listed["count"] == 0
    assert [p["status"] for p in compliance.get(PROPOSALS).json()["results"]] == ["withdrawn", "refused"]


def test_what_only_tightens_applies_at_once_and_a_mix_is_proposed_whole(compliance):
    rule = _rule(enabled=False, agent=Agent.objects.get(slug="crm-assistant"), percentage=10)
    for body in ({"enabled": True}, {"percentage": 20}, {"always": ["denial", "tool", "taint"]},
                 {"tools": ["send_email", "delete_account"]}, {"agent": None}, {"note": "why", "name": "renamed"}):
        answer = compliance.patch(f"{RULES}{rule.pk}/", body, format="json")
        assert answer.status_code == 200, (body, answer.content)
    assert not SamplingRuleProposal.objects.exists()
    made = _state(rule)
    assert made == {"enabled": True, "percentage": Decimal("20.00"), "always": ["denial", "tool", "taint"],
                    "tools": ["send_email", "delete_account"], "agent_id": None}
    mixed = compliance.patch(f"{RULES}{rule.pk}/", {"percentage": 90, "always": ["denial", "tool"]}, format="json")
    assert mixed.status_code == 202 and mixed.json()["loosens"] == ["drops the trigger(s) taint"]
    assert _state(rule) == made  # not even the higher percentage


def test_a_tightening_read_from_an_old_state_is_judged_against_the_row_as_it_is():
    rule = _rule(percentage=5)
    SamplingRule.objects.filter(pk=rule.pk).update(percentage=50)  # raised by someone else since it was read
    result = rules.rule_update(rule, {"percentage": Decimal("10")}, user=factories.compliance_officer())
    assert isinstance(result, SamplingRuleProposal)
    assert SamplingRule.objects.get(pk=rule.pk).percentage == 50


def test_a_proposal_older_than_the_window_or_the_rule_is_not_applied(compliance):
    rule = _rule()
    stale = compliance.patch(f"{RULES}{rule.pk}/", {"enabled": False}, format="json").json()
    assert compliance.patch(f"{RULES}{rule.pk}/", {"percentage": 60}, format="json").status_code == 200
    second = factories.api_client(factories.compliance_officer())
    answer = second.post(f"{PROPOSALS}{stale['id']}/approve/")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "proposal_stale")
    late = compliance.patch(f"{RULES}{rule.pk}/", {"enabled": False}, format="json").json()
    SamplingRuleProposal.objects.filter(pk=late["id"]).update(
        created_at=SamplingRuleProposal.objects.get(pk=late["id"]).created_at - timedelta(hours=2))
    with override_settings(WARRANT={**settings.WARRANT, "SECOND_ADMIN_WINDOW_HOURS": 1}):
        expired = second.post(f"{PROPOSALS}{late['id']}/approve/")
    assert (expired.status_code, expired.json()["error"]["code"]) == (409, "request_expired")
    assert SamplingRule.objects.get(pk=rule.pk).enabled is True


def test_the_platform_changes_rules_in_one_step():
    rule = _rule()
    assert isinstance(rules.rule_update(rule, {"enabled": False}, user=None), SamplingRule)
    assert rules.rule_delete(rule, user=None) is None
    assert not SamplingRule.objects.exists() and not SamplingRuleProposal.objects.exists()


def _form(rule, **changes) -> dict:
    values = {"name": rule.name, "agent": "", "percentage": str(rule.percentage), "always": rule.always,
              "tools": '["send_email"]', "enabled": "on", "note": ""} | changes
    return {k: v for k, v in values.items() if v is not None}


def test_the_workbench_proposes_a_loosening_and_a_deletion_and_saves_a_tightening(admin_client):
    rule = _rule()
    url = f"/admin/review/samplingrule/{rule.pk}/"
    disabled = admin_client.post(f"{url}change/", _form(rule, enabled=None, percentage="5"), follow=True)
    assert disabled.status_code == 200
    assert "Nothing changed yet: this disables the rule, lowers the percentage" in disabled.content.decode()
    assert _state(rule) == AS_MADE
    deleted = admin_client.post(f"{url}delete/", {"post": "yes"}, follow=True)
    assert "Nothing changed yet: this deletes the rule" in deleted.content.decode()
    assert _state(rule) == AS_MADE
    assert list(SamplingRuleProposal.objects.values_list("kind", "proposed_by__username")) == [
        ("delete", "admin"), ("update", "admin")]
    bulk = admin_client.post("/admin/review/samplingrule/", {"action": "delete_selected", "post": "yes",
                                                            "_selected_action": [rule.pk]})
    assert bulk.status_code in (200, 302) and _state(rule) == AS_MADE
    raised = admin_client.post(f"{url}change/", _form(rule, percentage="75"))
    assert raised.status_code == 302 and _state(rule)["percentage"] == Decimal("75.00")
