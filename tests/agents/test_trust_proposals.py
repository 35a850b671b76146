"""Marking something trusted takes two governance admins; marking it untrusted takes one.

The insider is a governance admin alone: a trusted source's results no longer taint a run, which
lifts the approval every side effect after reading it would need. So trusting is a proposal that
changes nothing, confirmed by a different governance admin (core.four_eyes), and the sealed trust
change names both; the chain of such changes still verifies online and offline.
"""

import io
import json
from contextlib import redirect_stdout
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from agents.models import Tool, ToolSource, TrustChange, TrustProposal
from agents.trust import ProposalRequired, tool_source_trust, tool_trust, trust_propose
from review.verification import review_verify_chain
from runs import signing
from runs.evidence import evidence_bundle_write
from warrant_verify.__main__ import main as verify_main

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


@pytest.fixture
def gov(demo):
    """A second governance admin (not a superuser) beside the demo's admin."""
    user = User.objects.create_user("gov2", password="x")
    user.groups.add(Group.objects.get(name="governance-admins"))
    return user


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _source() -> ToolSource:
    return ToolSource.objects.create(name="docs", kind="openapi", document={"openapi": "3.0.0", "paths": {}})


def _changes(name: str):
    return TrustChange.objects.filter(name=name).order_by("seq")


def test_patching_trusted_proposes_and_the_proposer_cannot_confirm(demo, gov):
    _source()
    admin = _api(User.objects.get(username="admin"))
    response = admin.patch("/api/v1/tool-sources/docs/", {"trusted": True, "trust_reason": "our wiki",
                                                          "timeout_seconds": 9}, format="json")
    assert response.status_code == 202, response.json()
    proposal = response.json()
    assert (proposal["subject"], proposal["name"], proposal["proposed_by"], proposal["state"], proposal["reason"]) == (
        "tool_source", "docs", "admin", "pending", "our wiki")
    source = ToolSource.objects.get(name="docs")
    assert (source.trusted, source.timeout_seconds) == (False, 9)  # the rest of the PATCH is made, not the mark
    assert not _changes("docs").exists()

    refused = admin.post(f"/api/v1/trust-proposals/{proposal['id']}/confirm/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "second_admin_required"
    assert "admin proposed it" in refused.json()["error"]["message"]
    assert ToolSource.objects.get(name="docs").trusted is False and not _changes("docs").exists()
    assert TrustProposal.objects.get(pk=proposal["id"]).outcome == "pending"
    again = admin.patch("/api/v1/tool-sources/docs/", {"trusted": True}, format="json")
    assert again.status_code == 409 and again.json()["error"]["details"] == {"proposal": proposal["id"]}


def test_a_second_admin_confirms_and_one_sealed_change_names_both(demo, gov, tmp_path):
    tool = Tool.objects.get(name="list_open_tickets")
    response = _api(gov).patch(f"/api/v1/tools/{tool.name}/", {"trusted_output": True,
                                                               "trust_reason": "titles are ours"}, format="json")
    assert response.status_code == 202 and Tool.objects.get(pk=tool.pk).trusted_output is False
    before = TrustChange.objects.count()
    confirmed = _api(User.objects.get(username="admin")).post(
        f"/api/v1/trust-proposals/{response.json()['id']}/confirm/")
    assert confirmed.status_code == 200, confirmed.json()
    assert (confirmed.json()["state"], confirmed.json()["decided_by"]) == ("confirmed", "admin")
    assert Tool.objects.get(pk=tool.pk).trusted_output is True
    assert TrustChange.objects.count() == before + 1
    change = _changes(tool.name).get()
    assert (change.changed_by.username, change.proposed_by, change.reason) == ("admin", gov, "titles are ours")
    assert confirmed.json()["change_seq"] == change.seq
    body = json.loads(change.body)
    assert body["changed_by"] == {"username": "admin", "roles": ["governance-admins"]}
    assert (body["proposed_by"]["username"], body["proposed_by"]["roles"]) == ("gov2", ["governance-admins"])
    checked = review_verify_chain()
    assert checked.valid, checked.failures

    bundle = tmp_path / "bundle"
    evidence_bundle_write(out_dir=bundle, requested_by=User.objects.get(username="compliance"))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(signing.key_set_document()))
    out = io.StringIO()
    with redirect_stdout(out):
        status = verify_main([str(bundle), "--public-key", str(keys), "--workers", "1"])
    assert status == 0, out.getvalue()
    assert f"{before + 1} trust changes (#1-#{before + 1})" in out.getvalue()
    trust_lines = (bundle / "trust.jsonl").read_text().splitlines()
    assert json.loads(json.loads(trust_lines[-1])["body"])["proposed_by"]["username"] == "gov2"


def test_untrusting_is_immediate_and_one_person_cannot_trust_in_one_step(demo):
    admin = User.objects.get(username="admin")
    response = _api(admin).patch("/api/v1/tools/list_accounts/", {"trusted_output": False}, format="json")
    assert response.status_code == 200 and response.json()["trusted"] is False
    change = _changes("list_accounts").last()
    assert (change.trusted, change.changed_by, change.proposed_by) == (False, admin, None)
    assert json.loads(change.body)["proposed_by"] is None
    with pytest.raises(ProposalRequired):
        tool_trust(tool=Tool.objects.get(name="list_accounts"), trusted=True, user=admin)
    with pytest.raises(ProposalRequired):
        tool_source_trust(source=_source(), trusted=True, user=admin)
    assert Tool.objects.get(name="list_accounts").trusted_output is False
    assert not ToolSource.objects.get(name="docs").trusted and not _changes("docs").exists()


def test_an_expired_proposal_is_refused_and_a_new_one_may_take_its_place(demo, gov, settings):
    settings.WARRANT = {**settings.WARRANT, "TRUST_PROPOSAL_HOURS": 2}
    proposal = trust_propose(target=_source(), user=gov, reason="r")
    assert proposal.expires_at - proposal.created_at == timedelta(hours=2)
    TrustProposal.objects.filter(pk=proposal.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    admin = _api(User.objects.get(username="admin"))
    listed = admin.get("/api/v1/trust-proposals/", {"name": "docs"}).json()["results"]
    assert [(p["id"], p["state"]) for p in listed] == [(proposal.pk, "expired")]
    response = admin.post(f"/api/v1/trust-proposals/{proposal.pk}/confirm/")
    assert response.status_code == 409 and response.json()["error"]["code"] == "request_expired"
    assert ToolSource.objects.get(name="docs").trusted is False and not _changes("docs").exists()
    assert TrustProposal.objects.get(pk=proposal.pk).outcome == "pending"
    fresh = trust_propose(target=ToolSource.objects.get(name="docs"), user=gov)
    assert TrustProposal.objects.get(pk=proposal.pk).outcome == "expired" and fresh.state == "pending"


def test_withdraw_and_refuse_change_nothing_and_each_is_its_own_persons(demo, gov):
    source = _source()
    admin_user = User.objects.get(username="admin")
    admin, second = _api(admin_user), _api(gov)
    first = trust_propose(target=source, user=gov)
    assert admin.post(f"/api/v1/trust-proposals/{first.pk}/withdraw/").status_code == 403
    assert second.post(f"/api/v1/trust-proposals/{first.pk}/refuse/").json()["error"]["code"] == \
        "second_admin_required"
    assert second.post(f"/api/v1/trust-proposals/{first.pk}/withdraw/").json()["state"] == "withdrawn"
    assert admin.post(f"/api/v1/trust-proposals/{first.pk}/confirm/").status_code == 409  # decided already
    other = trust_propose(target=source, user=gov)
    refused = admin.post(f"/api/v1/trust-proposals/{other.pk}/refuse/").json()
    assert (refused["state"], refused["decided_by"]) == ("refused", "admin")
    assert ToolSource.objects.get(pk=source.pk).trusted is False and not _changes("docs").exists()


def test_only_governance_admins_see_and_decide_proposals(demo, gov, operator, compliance):
    proposal = trust_propose(target=_source(), user=gov)
    for client in (operator, compliance):
        assert client.get("/api/v1/trust-proposals/").status_code == 403
        assert client.post(f"/api/v1/trust-proposals/{proposal.pk}/confirm/").status_code == 403
    assert ToolSource.objects.get(name="docs").trusted is False


def test_the_admin_form_proposes_and_the_admin_action_confirms(demo, gov):
    tool = Tool.objects.get(name="list_open_tickets")
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    form = {"name": tool.name, "description": tool.description, "input_schema": json.dumps(tool.input_schema),
            "enabled": "on", "handler": tool.handler, "timeout_seconds": tool.timeout_seconds,
            "approver_role": "", "trusted_output": "on"}
    response = client.post(f"/admin/agents/tool/{tool.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Tool.objects.get(pk=tool.pk).trusted_output is False and not _changes(tool.name).exists()
    proposal = TrustProposal.objects.get(name=tool.name, outcome="pending")
    assert proposal.proposed_by.username == "admin"
    action = {"action": "confirm", "_selected_action": [proposal.pk]}
    client.post("/admin/agents/trustproposal/", action)  # the proposer: refused, nothing set
    assert Tool.objects.get(pk=tool.pk).trusted_output is False
    second = Client()
    second.force_login(gov)
    gov.is_staff = True
    gov.save(update_fields=["is_staff"])
    # The workbench's proposal list by the governance admin role alone (governance.bootstrap).
    assert second.post("/admin/agents/trustproposal/", action).status_code == 302
    assert Tool.objects.get(pk=tool.pk).trusted_output is True
    change = _changes(tool.name).get()
    assert (change.changed_by, change.proposed_by.username) == (gov, "admin")


def test_the_platforms_own_marks_stay_one_step(demo):
    change = _changes("calculator").first()
    assert (change.trusted, change.changed_by, change.proposed_by) == (True, None, None)
    assert json.loads(change.body)["proposed_by"] is None
    assert not TrustProposal.objects.exists()


def test_asking_to_trust_what_is_trusted_already_proposes_nothing(demo):
    admin = _api(User.objects.get(username="admin"))
    response = admin.patch("/api/v1/tools/calculator/", {"trusted_output": True}, format="json")
    assert response.status_code == 200 and response.json()["trusted"] is True
    source = _source()
    ToolSource.objects.filter(pk=source.pk).update(trusted=True)
    assert admin.patch("/api/v1/tool-sources/docs/", {"trusted": True}, format="json").status_code == 200
    assert not TrustProposal.objects.exists() and Tool.objects.get(name="calculator").trusted_output is True
