"""Trust changes are a signed, witnessed chain: removing or rewriting one shows.

The insider here is a DBA (or a superuser at the database): they mark a source trusted so runs
read it untainted, or erase the changes that did, editing rows directly. Online verification
(review_verify_chain: GET review/verify/, manage.py review_check) and the offline verifier over
an exported bundle each report it; with the signing key as well, the witness still does.
"""

import io
import json
from contextlib import contextmanager, redirect_stdout

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction

from agents import append_only, trust
from agents.models import Tool, ToolSource, TrustChange, TrustProposal
from agents.trust import tool_source_trust, tool_trust, trust_confirm, trust_propose
from review.trust_chain import seal_trust_change, trust_body
from review.verification import review_verify_chain
from runs import services, signing
from runs.evidence import evidence_bundle_write
from runs.models import RunEvent
from tests import factories
from warrant_verify.__main__ import main as verify_main
from warrant_verify.archive import read_bundle
from warrant_verify.bundle import verify_bundle
from warrant_verify.messages import GENESIS, receipt_hash
from warrant_verify.review_chain import check_review_record
from warrant_verify.trust_chain import TRUST_CHECKPOINT_KIND, TRUST_FILE, trust_message, verify_trust_records

pytestmark = pytest.mark.django_db(transaction=True)
COLUMNS = ("seq", "prev_hash", "hash", "body", "key_id", "signature")


@contextmanager
def _as_dba():
    """The DBA's way past the append-only triggers on agents_trustchange: replica mode on
    PostgreSQL (ordinary triggers do not fire), dropped and re-made on SQLite; back in place after."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = replica")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET session_replication_role = DEFAULT")
        return
    append_only.TRIGGERS.drop(connection)
    try:
        yield
    finally:
        append_only.TRIGGERS.create(connection)


def _admin():
    return get_user_model().objects.get(username="admin")


def _source(name: str = "docs") -> ToolSource:
    return ToolSource.objects.create(name=name, kind="openapi", document={"openapi": "3.0.0", "paths": {}})


def _second_admin():
    user, _ = get_user_model().objects.get_or_create(username="gov2")
    user.groups.add(Group.objects.get(name="governance-admins"))
    return user


def _trusted_then_back(demo) -> ToolSource:
    """The insider's pattern: a source marked trusted (proposed by gov2, confirmed by admin), runs
    read it, then marked back."""
    source = _source()
    trust_confirm(proposal=trust_propose(target=source, user=_second_admin(), reason="our own wiki"), user=_admin())
    return tool_source_trust(source=source, trusted=False, user=_admin(), reason="done")


def rechain_from(first: TrustChange, edit) -> None:
    """What the holder of the signing key can do with database access: `edit` the change `first`
    (its row and body), then link and sign every change from it on again, consistently."""
    previous = first.prev_hash
    with _as_dba():
        for change in TrustChange.objects.filter(seq__gte=first.seq).order_by("seq"):
            if change.pk == first.pk:
                edit(change)
            change.prev_hash, change.hash = previous, receipt_hash(previous, change.body)
            change.signature = signing.sign(trust_message(seq=change.seq, prev_hash=change.prev_hash,
                                                          hash=change.hash, key_id=change.key_id))
            change.save()
            previous = change.hash


def _problems() -> list[str]:
    checked = review_verify_chain()
    return [str(p) for p in checked.failures]


def _offline(tmp_path, *, witness=None) -> tuple[int, str]:
    bundle = tmp_path / f"bundle-{len(list(tmp_path.iterdir()))}"
    evidence_bundle_write(out_dir=bundle, requested_by=get_user_model().objects.get(username="compliance"))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(signing.key_set_document()))
    argv = [str(bundle), "--public-key", str(keys), "--workers", "1"] + (["--witness", str(witness)] if witness else [])
    out = io.StringIO()
    with redirect_stdout(out):
        status = verify_main(argv)
    return status, out.getvalue()


def test_each_trust_change_is_sealed_in_a_chain_and_everything_verifies(demo, tmp_path):
    before = TrustChange.objects.count()  # the demo's own marks, sealed by the platform
    _trusted_then_back(demo)
    changes = list(TrustChange.objects.order_by("seq").values(*COLUMNS))
    assert [c["seq"] for c in changes] == list(range(1, before + 3)) and changes[0]["prev_hash"] == GENESIS
    assert all(c["prev_hash"] == p["hash"] for p, c in zip(changes, changes[1:], strict=False))
    body = json.loads(changes[-2]["body"])
    assert (body["subject"], body["name"], body["was_trusted"], body["trusted"], body["reason"]) == (
        "tool_source", "docs", False, True, "our own wiki")
    assert body["v"] == 2 and body["changed_by"] == {"username": "admin", "roles": ["governance-admins"]}
    assert (body["proposed_by"]["username"], body["proposed_by"]["roles"]) == ("gov2", ["governance-admins"])
    assert json.loads(changes[-1]["body"])["proposed_by"] is None  # marked back at once, by one admin
    assert verify_trust_records(changes, keys=signing.key_set()).failures == []
    checked = review_verify_chain()
    assert checked.valid, checked.failures
    assert f"all {before + 2} trust changes signed and chained, rows and marks match" in checked.reason
    status, out = _offline(tmp_path)
    assert status == 0, out
    assert f"{before + 2} trust changes (#1-#{before + 2})" in out


def test_a_trust_change_deleted_by_the_dba_is_caught_online_and_offline(demo, tmp_path):
    _trusted_then_back(demo)
    with _as_dba():
        TrustChange.objects.filter(name="docs", trusted=True).delete()  # the trace of "trusted" erased
    problems = _problems()
    assert any(p.startswith("trust_chain: trust change ") and "a trust change is missing" in p
               for p in problems), problems
    status, out = _offline(tmp_path)
    assert status == 1 and "trust.jsonl: seq" in out and "a trust change is missing" in out, out


def test_erasing_the_last_changes_is_caught_against_the_signed_manifest_and_the_witness(demo, settings, tmp_path):
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    _trusted_then_back(demo)
    lines = [json.loads(line) for line in (tmp_path / "witness.jsonl").read_text().splitlines()]
    head = TrustChange.objects.order_by("-seq").values_list("seq", "hash").first()
    assert [(line["seq"], line["head"]) for line in lines if line["kind"] == TRUST_CHECKPOINT_KIND][-1] == head
    # Both changes removed from the end: what remains is a consistent, validly signed chain.
    with _as_dba():
        TrustChange.objects.filter(name="docs").delete()
    problems = _problems()
    assert any(p.startswith("witness: witness file: trust checkpoint") and "trust changes were cut off the end" in p
               for p in problems), problems
    status, out = _offline(tmp_path, witness=tmp_path / "witness.jsonl")
    assert status == 1 and "trust checkpoint" in out and "trust changes were cut off the end" in out, out


def test_a_trust_change_rewritten_and_re_signed_by_the_key_holder_fails_against_the_witness(demo, settings, tmp_path):
    settings.WARRANT_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    _trusted_then_back(demo)
    first = TrustChange.objects.get(name="docs", trusted=True)
    body = json.loads(first.body) | {"reason": "reviewed by security"}

    def edit(change: TrustChange) -> None:
        change.body = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        change.reason = body["reason"]

    rechain_from(first, edit)
    problems = _problems()
    assert problems and all(p.startswith("witness: ") for p in problems), problems
    assert any("the trust chain was rewritten after this checkpoint" in p for p in problems), problems
    status, out = _offline(tmp_path, witness=tmp_path / "witness.jsonl")
    assert status == 1 and "signed head for trust change" in out, out


def test_a_row_edited_behind_its_seal_and_a_mark_set_behind_agents_trust_are_caught(demo, tmp_path):
    _trusted_then_back(demo)
    with _as_dba():
        TrustChange.objects.filter(name="docs", trusted=True).update(reason="approved by the CISO")
    ToolSource.objects.filter(name="docs").update(trusted=True)  # trusted again, with no change written
    Tool.objects.filter(name="list_accounts").update(trusted_output=False)  # untrusted: fails closed, fine
    problems = _problems()
    assert any(p.startswith("trust: trust change #") and "the row's reason differs" in p for p in problems), problems
    assert any(p.startswith("trust: tool source docs: is marked trusted, but no sealed trust change") for p in problems)
    assert not any("list_accounts" in p for p in problems), problems


def test_the_database_refuses_to_change_or_remove_a_trust_change(demo):
    _trusted_then_back(demo)
    change = TrustChange.objects.get(name="docs", trusted=True)
    for attempt in (lambda: TrustChange.objects.filter(pk=change.pk).update(reason="approved by the CISO"),
                    lambda: TrustChange.objects.filter(pk=change.pk).delete()):
        with pytest.raises(DatabaseError, match="agents_trustchange rows are append-only"), transaction.atomic():
            attempt()
    assert TrustChange.objects.get(pk=change.pk).reason == "our own wiki"
    assert review_verify_chain().valid
    append_only.TRIGGERS.drop(connection)  # left dropped: the online check says so
    try:
        assert any(p.startswith("append_only: agents_trustchange_no_") for p in _problems())
    finally:
        append_only.TRIGGERS.create(connection)


def test_a_body_edited_in_the_bundle_fails_offline(demo, tmp_path):
    _trusted_then_back(demo)
    evidence_bundle_write(out_dir=tmp_path / "b", requested_by=get_user_model().objects.get(username="compliance"))
    path = tmp_path / "b" / TRUST_FILE
    path.write_text(path.read_text().replace("our own wiki", "signed off by two people"))
    failures = [str(f) for f in verify_bundle(read_bundle(tmp_path / "b"), trusted=signing.key_set()).failures]
    assert any(f.startswith("trust.jsonl: file: sha256 differs") for f in failures), failures
    assert any(f.startswith("trust.jsonl: seq") and "hash is not sha256" in f for f in failures), failures


def test_trust_and_review_signatures_cannot_stand_for_each_other(demo):
    change = TrustChange.objects.order_by("seq").values(*COLUMNS).first()
    as_review = change | {"id": "x", "run_id": "y"}
    assert any("signature" in p for p in check_review_record(as_review, signing.key_set()))


def test_no_trust_mark_changes_unsealed(demo, monkeypatch):
    monkeypatch.setattr(trust, "SEAL", [])  # review.apps not loaded: nothing would seal the change
    before = TrustChange.objects.count()
    with pytest.raises(ImproperlyConfigured):
        tool_trust(tool=Tool.objects.get(name="list_accounts"), trusted=False, user=_admin())
    assert TrustChange.objects.count() == before
    assert Tool.objects.get(name="list_accounts").trusted_output is True


def test_a_result_read_as_trusted_with_no_change_that_trusted_it_fails_offline(demo, tmp_path):
    """The chain intact, the column set in the database: the signed trace of a run that read the
    tool under that mark is held to the chain's changes, so the bundle says what the DBA did."""
    Tool.objects.filter(name="list_open_tickets").update(trusted_output=True)  # no TrustChange written
    factories.replay_agent(*Tool.objects.filter(source=Tool.Source.PYTHON, tool_source=None))  # published: frozen
    calls = [{"name": "list_open_tickets", "arguments": {"account_id": "A-200"}},
             {"name": "list_accounts", "arguments": {}}]  # trusted by the demo's own sealed change
    run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps({"turns": [calls]}),
                                caller=get_user_model().objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    read = [e.data.get("source_trusted") for e in RunEvent.objects.filter(run=run, kind="tool_call").order_by("seq")]
    assert read == [True, True]
    assert any("tool list_open_tickets: is marked trusted, but no sealed trust change" in p for p in _problems())
    status, out = _offline(tmp_path)
    assert status == 1, out
    failing = [line for line in out.splitlines() if "was read as trusted" in line]
    assert len(failing) == 1 and failing[0].startswith(f"events.jsonl: run {run.id} event ") and \
        "list_open_tickets's result was read as trusted, but no change in trust.jsonl" in failing[0], out


def _signed(bodies: list[dict]) -> list[dict]:
    """A chain of trust records over `bodies`, sealed and signed as review.trust_chain does."""
    records, previous = [], GENESIS
    for seq, body in enumerate(bodies, start=1):
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = receipt_hash(previous, text)
        key_id = signing.signing_key()[0]
        records.append({"seq": seq, "prev_hash": previous, "hash": digest, "body": text, "key_id": key_id,
                        "signature": signing.sign(trust_message(seq=seq, prev_hash=previous, hash=digest,
                                                                key_id=key_id))})
        previous = digest
    return records


def _body(version: int, *, by: str | None = "admin", proposer: str | None = None, trusted: bool = True) -> dict:
    change = TrustChange(subject="tool_source", name="docs", trusted=trusted, was_trusted=not trusted, reason="r",
                         changed_by=get_user_model().objects.get(username=by) if by else None)
    proposal = None
    if proposer:
        proposal = TrustProposal(proposed_by=get_user_model().objects.get(username=proposer), proposer_roles=[],
                                 created_at=change.changed_at)
    return trust_body(change, roles=["governance-admins"], proposal=proposal, version=version)


def test_old_v1_changes_still_verify_before_v2_ones_and_the_offline_rules_hold(demo):
    """A chain sealed before proposals (v1: one admin, no proposed_by) followed by v2 changes
    verifies; a v2 mark of trust by one person, or a v1 body after a v2, is refused offline."""
    _second_admin()
    keys = signing.key_set()
    history = [_body(1), _body(1, trusted=False), _body(2, proposer="gov2"), _body(2, trusted=False),
               _body(2, by=None)]
    assert verify_trust_records(_signed(history), keys=keys).failures == []
    for bad, reason in [(_body(2), "marked it trusted alone"), (_body(2, proposer="admin"), "both proposed and"),
                        (_body(2, trusted=False, proposer="gov2"), "needs no proposal"),
                        (_body(2, by=None, proposer="gov2"), "needs no proposal")]:
        failures = verify_trust_records(_signed([bad]), keys=keys).failures
        assert [f.record for f in failures] == ["seq 1"] and reason in failures[0].reason, (reason, failures)
    failures = verify_trust_records(_signed([_body(2, trusted=False), _body(1)]), keys=keys).failures
    assert len(failures) == 1 and "a v1 body after the v2 trust change #1" in failures[0].reason, failures
    no_field = _body(2, trusted=False)
    del no_field["proposed_by"]
    assert "a v2 body without proposed_by" in verify_trust_records(_signed([no_field]), keys=keys).failures[0].reason


def test_a_one_person_trust_sealed_by_the_key_holder_fails_online_and_offline(demo, tmp_path):
    """Whoever holds the signing key (or runs a patched server) seals admin's mark with no second
    admin: the chain's own rule says so, on the server and in the bundle."""
    source = _source()
    seal_trust_change(TrustChange(subject="tool_source", name="docs", trusted=True, was_trusted=False,
                                              changed_by=_admin(), reason="alone"))
    ToolSource.objects.filter(pk=source.pk).update(trusted=True)
    problems = _problems()
    assert any("marked it trusted alone: no second governance admin proposed it" in p for p in problems), problems
    status, out = _offline(tmp_path)
    assert status == 1 and "marked it trusted alone" in out, out
