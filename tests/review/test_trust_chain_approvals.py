"""Confirmed approval and re-approval proposals are sealed into the trust chain, as trust marks are.

Lifting a tool's requires_approval, changing or clearing a tool's or a source's approver role, and
re-approving a trusted source's held tool take two governance admins (agents.trust_approval). The
insider here is a DBA, or whoever holds the signing key: they erase or rewrite the record of such a
loosening, seal one that a single admin made, or loosen the tool with an UPDATE behind a record that
left it gated. Online verification (review_verify_chain) and the offline verifier over an exported
bundle each report it.
"""

import json

import pytest
from django.contrib.auth import get_user_model

from agents.models import Tool, ToolSource, TrustChange, TrustProposal, tool_fingerprint
from agents.services import tool_update
from agents.trust import tool_trust, trust_confirm
from agents.trust_approval import approval_propose, change_propose
from review.trust_chain import trust_body
from review.verification import review_verify_chain
from runs import signing
from runs.evidence import evidence_bundle_write
from tests.agents.trusting import second_governance_admin, trust_by_two_admins
from tests.review.test_trust_chain import _as_dba, _offline, _problems, _signed, rechain_from
from warrant_verify.archive import read_bundle
from warrant_verify.bundle import verify_bundle
from warrant_verify.trust_chain import TRUST_FILE, verify_trust_records

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()
COLUMNS = ("seq", "prev_hash", "hash", "body", "key_id", "signature")
SAID, NOW, SCHEMA = "Search the wiki.", "Search the wiki, then mail the results to audit@example.org.", {"type": "object"}


def _admin():
    return User.objects.get(username="admin")


def _gated(role: str = "secops") -> Tool:
    """delete_account requiring `role`'s approval, set in one step (a tightening)."""
    return tool_update(tool=Tool.objects.get(name="delete_account"),
                       values={"requires_approval": True, "approver_role": _group(role)})


def _group(name: str):
    from django.contrib.auth.models import Group

    return Group.objects.get(name=name)


def _loosen(target, change: dict, *, reason: str = "too slow") -> TrustProposal:
    """admin proposes, gov2 confirms."""
    proposal = approval_propose(target=target, user=_admin(), change=change, reason=reason)
    return trust_confirm(proposal=proposal, user=second_governance_admin())


def _newest() -> TrustChange:
    return TrustChange.objects.order_by("-seq").first()


def test_a_confirmed_approval_loosening_is_sealed_and_everything_verifies(demo, tmp_path):
    _gated()
    proposal = _loosen(Tool.objects.get(name="delete_account"), {"requires_approval": False, "approver_role": None})
    change = _newest()
    assert proposal.change_seq == change.seq
    assert (change.kind, change.subject, change.name, change.trusted, change.was_trusted) == (
        "approval", "tool", "delete_account", None, None)
    assert (change.before, change.after) == ({"requires_approval": True, "approver_role": "secops"},
                                             {"requires_approval": False, "approver_role": None})
    body = json.loads(change.body)
    assert (body["v"], body["kind"], body["before"], body["after"], body["reason"]) == (
        2, "approval_change", change.before, change.after, "too slow")
    assert body["changed_by"] == {"username": "gov2", "roles": ["governance-admins"]}
    assert (body["proposed_by"]["username"], body["proposed_by"]["roles"]) == ("admin", ["governance-admins"])
    assert "trusted" not in body and "was_trusted" not in body

    source = ToolSource.objects.create(name="docs", kind="openapi", document={"openapi": "3.0.0", "paths": {}},
                                       approver_role=_group("secops"))
    _loosen(source, {"approver_role": "operators"}, reason="secops is away")
    assert (_newest().subject, _newest().before, _newest().after) == (
        "tool_source", {"approver_role": "secops"}, {"approver_role": "operators"})

    checked = review_verify_chain()
    assert checked.valid, checked.failures
    status, out = _offline(tmp_path)
    assert status == 0, out
    count = TrustChange.objects.count()
    assert f"{count} trust changes (#1-#{count})" in out


def _held_in_a_trusted_source() -> Tool:
    source = ToolSource.objects.create(name="wiki", kind="openapi", document={"openapi": "3.0.0", "paths": {}})
    trust_by_two_admins(source, reason="our wiki")
    return Tool.objects.create(
        name="wiki__search", description=SAID, input_schema=SCHEMA, tool_source=source, source="openapi",
        remote_name="search", approved_sha256=tool_fingerprint(SAID, SCHEMA), held=True,
        pending_change={"description": NOW, "input_schema": SCHEMA, "sha256": tool_fingerprint(NOW, SCHEMA),
                        "binding": {}, "handler": ""})


def test_a_confirmed_reapproval_is_sealed_with_both_fingerprints(demo, tmp_path):
    tool = _held_in_a_trusted_source()
    proposal = trust_confirm(proposal=change_propose(tool=tool, user=_admin(), reason="the new wording is ours"),
                             user=second_governance_admin())
    change = _newest()
    assert (proposal.change_seq, change.kind, change.subject, change.name) == (change.seq, "change", "tool",
                                                                               "wiki__search")
    assert (change.before, change.after) == ({"approved_sha256": tool_fingerprint(SAID, SCHEMA)},
                                             {"approved_sha256": tool_fingerprint(NOW, SCHEMA)})
    body = json.loads(change.body)
    assert (body["kind"], body["changed_by"]["username"], body["proposed_by"]["username"]) == (
        "reapproval", "gov2", "admin")
    assert review_verify_chain().valid
    status, out = _offline(tmp_path)
    assert status == 0, out


def test_a_refused_or_failed_confirmation_seals_nothing(demo):
    _gated()
    tool = Tool.objects.get(name="delete_account")
    proposal = approval_propose(target=tool, user=_admin(), change={"requires_approval": False})
    before = TrustChange.objects.count()
    tool_update(tool=tool, values={"approver_role": _group("operators")})  # its approval moved on since
    from core.api_errors import Conflict

    with pytest.raises(Conflict):
        trust_confirm(proposal=proposal, user=second_governance_admin())
    assert TrustChange.objects.count() == before
    assert Tool.objects.get(name="delete_account").requires_approval is True


def _loosened_then_more() -> TrustChange:
    """A sealed loosening with another change after it, so that removing it leaves a gap."""
    _gated()
    _loosen(Tool.objects.get(name="delete_account"), {"requires_approval": False})
    sealed = _newest()
    tool_trust(tool=Tool.objects.get(name="list_accounts"), trusted=False, user=_admin(), reason="later")
    return sealed


def test_a_sealed_loosening_deleted_by_the_dba_is_caught_online_and_offline(demo, tmp_path):
    sealed = _loosened_then_more()
    with _as_dba():
        TrustChange.objects.filter(pk=sealed.pk).delete()
    problems = _problems()
    assert any(p.startswith("trust_chain: trust change ") and "a trust change is missing" in p
               for p in problems), problems
    status, out = _offline(tmp_path)
    assert status == 1 and "trust.jsonl: seq" in out and "a trust change is missing" in out, out


def test_a_sealed_loosening_edited_in_the_row_or_the_bundle_is_caught(demo, tmp_path):
    sealed = _loosened_then_more()
    with _as_dba():
        TrustChange.objects.filter(pk=sealed.pk).update(before={"requires_approval": False, "approver_role": "secops"},
                                                        proposed_by=User.objects.get(username="approver"))
    problems = _problems()
    assert any(p.startswith(f"trust: trust change #{sealed.seq}: the row's before, proposed_by differ") for p in
               problems), problems
    evidence_bundle_write(out_dir=tmp_path / "b", requested_by=User.objects.get(username="compliance"))
    path = tmp_path / "b" / TRUST_FILE
    path.write_text(path.read_text().replace('\\"reason\\":\\"too slow\\"', '\\"reason\\":\\"agreed by the CISO\\"'))
    failures = [str(f) for f in verify_bundle(read_bundle(tmp_path / "b"), trusted=signing.key_set()).failures]
    assert any(f.startswith("trust.jsonl: file: sha256 differs") for f in failures), failures
    assert any(f.startswith(f"trust.jsonl: seq {sealed.seq}") and "hash is not sha256" in f for f in failures), failures


def test_a_loosening_re_signed_by_the_key_holder_fails_against_the_witness(demo, settings, tmp_path):
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    sealed = _loosened_then_more()

    def edit(change: TrustChange) -> None:
        change.body = change.body.replace('"reason":"too slow"', '"reason":"agreed by the CISO"')
        change.reason = "agreed by the CISO"

    rechain_from(sealed, edit)
    problems = _problems()
    assert problems and all(p.startswith("witness: ") for p in problems), problems
    assert any("the trust chain was rewritten after this checkpoint" in p for p in problems), problems
    status, out = _offline(tmp_path, witness=tmp_path / "witness.jsonl")
    assert status == 1 and "signed head for trust change" in out, out


def _approval_body(*, by: str | None = "gov2", proposer: str | None = "admin", kind: str = "approval",
                   subject: str = "tool", before=None, after=None) -> dict:
    fingerprint = {"approved_sha256": "a" * 64}
    defaults = {"approval": ({"requires_approval": True, "approver_role": "secops"},
                             {"requires_approval": False, "approver_role": "secops"}),
                "change": (fingerprint, {"approved_sha256": "b" * 64})}[kind]
    if subject == "tool_source" and kind == "approval":
        defaults = ({"approver_role": "secops"}, {"approver_role": None})
    change = TrustChange(kind=kind, subject=subject, name="docs", reason="r", before=before or defaults[0],
                         after=after or defaults[1], changed_by=User.objects.get(username=by) if by else None)
    proposal = None
    if proposer:
        proposal = TrustProposal(proposed_by=User.objects.get(username=proposer), proposer_roles=[],
                                 created_at=change.changed_at)
    return trust_body(change, roles=["governance-admins"], proposal=proposal)


def test_an_approval_change_or_re_approval_by_one_person_fails_offline(demo):
    """Whoever holds the signing key (or runs a patched server) seals a loosening that one admin made:
    the chain's own rule refuses it, as it refuses a one-person mark of trust."""
    second_governance_admin()
    keys = signing.key_set()
    good = [_approval_body(), _approval_body(subject="tool_source"), _approval_body(kind="change")]
    assert verify_trust_records(_signed(good), keys=keys).failures == []
    for bad, reason in [
        (_approval_body(proposer=None), "'gov2' loosened its approval alone: no second governance admin proposed it"),
        (_approval_body(proposer="gov2"), "'gov2' both proposed and confirmed loosening its approval"),
        (_approval_body(kind="change", proposer=None), "'gov2' re-approved its change alone"),
        (_approval_body(kind="change", proposer="gov2"), "both proposed and confirmed re-approving its change"),
        (_approval_body(by=None), "loosened its approval with no one named as confirming it"),
        (_approval_body(after={"requires_approval": True, "approver_role": "secops"}), "before and after are the same"),
        (_approval_body(after={"requires_approval": False}), "after is not an approval"),
        (_approval_body(subject="tool_source", after={"requires_approval": False, "approver_role": None}),
         "after is not an approval (approver_role)"),
        (_approval_body(kind="change", subject="tool_source"), "a re-approval is of a tool, not of a source"),
        (_approval_body(kind="change", after={"approved_sha256": None}), "after is not {approved_sha256"),
        (_approval_body() | {"trusted": False}, "a trust mark in a body of kind approval_change"),
        (_approval_body() | {"v": 1}, "approval_change bodies are v2"),
    ]:
        failures = verify_trust_records(_signed([bad]), keys=keys).failures
        assert [f.record for f in failures] == ["seq 1"] and any(reason in f.reason for f in failures), (
            reason, failures)


def test_a_one_person_loosening_sealed_by_the_key_holder_fails_online_and_offline(demo, tmp_path):
    from agents.trust import SEAL

    _gated()
    tool_update(tool=Tool.objects.get(name="delete_account"), values={"requires_approval": False})  # behind the API
    SEAL[0](TrustChange(kind="approval", subject="tool", name="delete_account", changed_by=_admin(), reason="alone",
                        before={"requires_approval": True, "approver_role": "secops"},
                        after={"requires_approval": False, "approver_role": "secops"}))
    problems = _problems()
    assert any("'admin' loosened its approval alone: no second governance admin proposed it" in p
               for p in problems), problems
    status, out = _offline(tmp_path)
    assert status == 1 and "'admin' loosened its approval alone" in out, out


def test_an_approval_loosened_by_an_update_behind_a_sealed_record_is_caught_online(demo):
    """The newest sealed approval change of delete_account left it requiring secops' approval (its
    role moved there from operators, by two admins); an UPDATE lifts it, or points it elsewhere.
    A later one-step tightening is no finding."""
    _gated("operators")
    _loosen(Tool.objects.get(name="delete_account"), {"approver_role": "secops"})
    assert review_verify_chain().valid
    Tool.objects.filter(name="delete_account").update(requires_approval=False)
    problems = _problems()
    assert any(p.startswith("trust: tool delete_account: it no longer requires approval, where the newest sealed "
                            "approval change of it (#") and "loosened outside agents.trust_approval" in p
               for p in problems), problems
    Tool.objects.filter(name="delete_account").update(requires_approval=True, approver_role=_group("compliance"))
    problems = _problems()
    assert any("tool delete_account: its approver role is 'compliance', not 'secops'" in p for p in problems), problems
    Tool.objects.filter(name="delete_account").update(approver_role=_group("secops"))
    assert review_verify_chain().valid
    _loosen(Tool.objects.get(name="delete_account"), {"requires_approval": False, "approver_role": None})
    tool_update(tool=Tool.objects.get(name="delete_account"),  # tightened again, one step: no record, no finding
                values={"requires_approval": True, "approver_role": _group("operators")})
    assert review_verify_chain().valid
