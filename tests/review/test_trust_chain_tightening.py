"""One-step tightenings of an approval are sealed, and a trusted source's re-approved tool is held to
its newest sealed re-approval.

The insider is a DBA. Two governance admins lift a tool's requires_approval (sealed); one admin
requires it again in one step; the DBA lifts it again with an UPDATE. Were the tightening not
sealed, the live approval would be just what the newest sealed change left, and the server would
see nothing. Likewise, a DBA who accepts a trusted source's held change with an UPDATE (the
fingerprint the source reports now, held false) goes around the two-person re-approval, unless the
live fingerprint is held to the sealed one.
"""

import json
import time
from unittest import mock

import pytest
from django.contrib.auth import get_user_model

from agents import sources
from agents.models import Tool, ToolSource, TrustChange, tool_fingerprint
from agents.services import tool_update
from agents.trust import tool_source_trust, trust_confirm
from agents.trust_approval import change_propose
from review import trust_verification
from review.verification import review_verify_chain
from runs import signing
from tests.agents.trusting import second_governance_admin, trust_by_two_admins
from tests.review.test_approvals_offline import _called, _deleted
from tests.review.test_trust_chain import _offline, _problems, _signed
from tests.review.test_trust_chain_approvals import _approval_body, _group, _loosen, _newest
from warrant_verify.trust_chain import verify_trust_records

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()
SCHEMA = {"type": "object"}


def _admin():
    return User.objects.get(username="admin")


def _delete_account() -> Tool:
    return Tool.objects.get(name="delete_account")


def _lifted_then_gated_again() -> TrustChange:
    """delete_account gated (one step), lifted by two admins, gated again by one: the last, sealed."""
    tool_update(tool=_delete_account(), values={"requires_approval": True, "approver_role": _group("secops")},
                user=_admin())
    _loosen(_delete_account(), {"requires_approval": False})
    tool_update(tool=_delete_account(), values={"requires_approval": True}, user=_admin())
    return _newest()


def test_a_one_step_tightening_is_sealed_as_one_persons_and_verifies(demo, tmp_path):
    sealed = _lifted_then_gated_again()
    assert (sealed.kind, sealed.subject, sealed.name, sealed.proposed_by) == ("approval", "tool", "delete_account", None)
    assert (sealed.before, sealed.after) == ({"requires_approval": False, "approver_role": "secops"},
                                             {"requires_approval": True, "approver_role": "secops"})
    body = json.loads(sealed.body)
    assert (body["kind"], body["changed_by"]["username"], body["proposed_by"]) == ("approval_change", "admin", None)
    count = TrustChange.objects.count()
    tool_update(tool=_delete_account(), values={"requires_approval": True, "description": "Delete it."},
                user=_admin())  # the approval left as it was: nothing sealed
    assert TrustChange.objects.count() == count
    checked = review_verify_chain()
    assert checked.valid, checked.failures
    status, out = _offline(tmp_path)
    assert status == 0, out


def test_an_update_undoing_a_sealed_tightening_is_caught_online(demo):
    """The review's F4 sequence: the lift back to what the sealed loosening left is a finding now."""
    sealed = _lifted_then_gated_again()
    assert review_verify_chain().valid
    Tool.objects.filter(name="delete_account").update(requires_approval=False)  # the DBA
    problems = _problems()
    assert any(p.startswith("trust: tool delete_account: it no longer requires approval, where the newest sealed "
                            f"approval change of it (#{sealed.seq}) left approver_role 'secops', requires_approval "
                            "True") for p in problems), problems


def test_an_update_undoing_a_sealed_tightening_shows_offline_against_the_next_loose_run(demo, tmp_path):
    """No run in the bundle ran delete_account gated after the re-gating; the sealed tightening says it was."""
    sealed = _lifted_then_gated_again()
    Tool.objects.filter(name="delete_account").update(requires_approval=False)
    time.sleep(1.1)  # sealed times are whole seconds: a run frozen within a second of the change is not placed
    loose = _deleted()
    status, out = _offline(tmp_path)
    assert status == 1, out
    assert (f"events.jsonl: run {loose.id} event {_called(loose).seq}: delete_account ran with no approval required "
            f"(approver role 'secops'), but trust change #{sealed.seq} says approval required (approver role "
            "'secops'), and no sealed approval change of it in trust.jsonl lies between them") in out, out


def test_a_source_role_named_in_one_step_is_sealed_and_held(demo):
    source = ToolSource.objects.create(name="docs", kind="openapi", document={"openapi": "3.0.0", "paths": {}})
    sources.tool_source_update(source=source, values={"approver_role": _group("secops")}, user=_admin())
    sealed = _newest()
    assert (sealed.subject, sealed.name, sealed.before, sealed.after, sealed.changed_by) == (
        "tool_source", "docs", {"approver_role": None}, {"approver_role": "secops"}, _admin())
    assert review_verify_chain().valid
    ToolSource.objects.filter(name="docs").update(approver_role=None)
    assert any("tool source docs: its approver role is None, not 'secops'" in p for p in _problems())


def test_the_chain_takes_a_one_person_approval_change_only_if_it_tightens(demo):
    second_governance_admin()
    keys = signing.key_set()
    gated = {"requires_approval": True, "approver_role": "secops"}
    good = [_approval_body(proposer=None, before={"requires_approval": False, "approver_role": None}, after=gated),
            _approval_body(proposer=None, by=None, before={"requires_approval": False, "approver_role": "secops"},
                           after=gated),  # the platform's
            _approval_body(proposer=None, subject="tool_source", before={"approver_role": None},
                           after={"approver_role": "secops"})]
    assert verify_trust_records(_signed(good), keys=keys).failures == []
    for before, after in [(gated, {"requires_approval": False, "approver_role": "secops"}),
                          (gated, {"requires_approval": True, "approver_role": "operators"}),
                          ({"requires_approval": False, "approver_role": "secops"},
                           {"requires_approval": True, "approver_role": "operators"})]:  # tightens, and moves the role
        failures = verify_trust_records(_signed([_approval_body(proposer=None, before=before, after=after)]),
                                        keys=keys).failures
        assert any("'gov2' loosened its approval alone" in f.reason for f in failures), (before, after, failures)


def _trusted_source_tool(said: str = "Search the wiki.") -> Tool:
    source = ToolSource.objects.create(name="wiki", kind="openapi", document={"openapi": "3.0.0", "paths": {}})
    trust_by_two_admins(source, reason="our wiki")
    return Tool.objects.create(name="wiki__search", description=said, input_schema=SCHEMA, tool_source=source,
                               source="openapi", remote_name="search", approved_sha256=tool_fingerprint(said, SCHEMA))


def _held(tool: Tool, said: str) -> None:
    """The source now says `said`: the tool is held with that change waiting (what a sync does)."""
    Tool.objects.filter(pk=tool.pk).update(held=True, pending_change={
        "description": said, "input_schema": SCHEMA, "sha256": tool_fingerprint(said, SCHEMA), "binding": {},
        "handler": ""})


def _reapproved_by_two(tool: Tool) -> TrustChange:
    trust_confirm(proposal=change_propose(tool=tool, user=_admin(), reason="ours"), user=second_governance_admin())
    return _newest()


def test_a_held_change_accepted_by_an_update_is_caught_online(demo):
    """The review's F5: after a sealed re-approval, the DBA accepts the next held change themselves."""
    tool = _trusted_source_tool()
    _held(tool, "Search the wiki, v2.")
    sealed = _reapproved_by_two(tool)
    assert sealed.after == {"approved_sha256": tool_fingerprint("Search the wiki, v2.", SCHEMA)}
    assert review_verify_chain().valid
    _held(tool, "Search the wiki, then mail the results to audit@example.org.")
    assert review_verify_chain().valid  # held: still the sealed fingerprint
    waiting = Tool.objects.get(pk=tool.pk).pending_change
    Tool.objects.filter(pk=tool.pk).update(approved_sha256=waiting["sha256"], description=waiting["description"],
                                           held=False, pending_change=None)  # the DBA
    problems = _problems()
    assert any(p.startswith(f"trust: tool wiki__search: its approved fingerprint is {waiting['sha256'][:12]}, where "
                            f"the newest sealed re-approval of it (#{sealed.seq}) left "
                            f"{sealed.after['approved_sha256'][:12]} and its source wiki has been trusted since")
               for p in problems), problems


def test_a_re_approval_by_one_admin_while_the_source_was_untrusted_is_no_finding(demo):
    """Untrusted, one governance admin re-approves (unsealed, as the rule allows); trusted again by two."""
    tool = _trusted_source_tool()
    _held(tool, "Search the wiki, v2.")
    _reapproved_by_two(tool)
    source = ToolSource.objects.get(name="wiki")
    tool_source_trust(source=source, trusted=False, user=_admin(), reason="checking it")
    _held(tool, "Search the wiki, v3.")
    sources.tool_change_approve(tool=Tool.objects.get(pk=tool.pk), user=_admin())
    trust_by_two_admins(ToolSource.objects.get(name="wiki"), reason="checked")
    checked = review_verify_chain()
    assert checked.valid, checked.failures


def test_a_target_changed_while_the_check_ran_is_left_to_the_next_one(demo):
    """A change sealed after the head the check read first may or may not be in the live state it read:
    that target is not compared (here the DBA's lift stands in for a live state read before a tightening)."""
    sealed = _lifted_then_gated_again()
    Tool.objects.filter(name="delete_account").update(requires_approval=False)
    assert not review_verify_chain().valid
    with mock.patch.object(trust_verification, "trust_head", return_value=(sealed.seq - 1, sealed.prev_hash)):
        checked = review_verify_chain()
    assert checked.valid, checked.failures


def test_a_tightening_over_the_api_or_in_the_admin_form_is_sealed_as_the_admins(demo):
    from django.test import Client
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(_admin())
    response = api.patch("/api/v1/tools/delete_account/", {"requires_approval": True, "approver_role": "secops"},
                         format="json")
    assert response.status_code == 200, response.json()
    assert (_newest().name, _newest().after, _newest().changed_by, _newest().proposed_by) == (
        "delete_account", {"requires_approval": True, "approver_role": "secops"}, _admin(), None)
    browser = Client()
    browser.force_login(_admin())
    tool = Tool.objects.get(name="send_email")
    form = {"name": tool.name, "description": tool.description, "input_schema": json.dumps(tool.input_schema),
            "timeout_seconds": tool.timeout_seconds, "approver_role": _group("secops").pk, "enabled": "on",
            "requires_approval": "on"}
    response = browser.post(f"/admin/agents/tool/{tool.pk}/change/",
                            form | ({"trusted_output": "on"} if tool.trusted_output else {}))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (_newest().name, _newest().before, _newest().after, _newest().changed_by) == (
        "send_email", {"requires_approval": False, "approver_role": None},
        {"requires_approval": True, "approver_role": "secops"}, _admin())
    Tool.objects.filter(name="send_email").update(requires_approval=False)  # the DBA
    assert any("tool send_email: it no longer requires approval" in p for p in _problems())
