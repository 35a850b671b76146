"""A tool's approval lifted behind the two-person rule shows in an exported bundle, offline.

The insider is a DBA: `UPDATE agents_tool SET requires_approval = false` on a tool that never had
a sealed approval change leaves the trust chain intact, and the server holds such a tool to nothing.
Each tool_call event of the signed trace says what approval the run's frozen snapshot gave the tool
(runs.tool_batch), so the verifier (warrant_verify.approvals) sees a run that ran it loose after a
run that ran it gated, with no sealed approval change of it between them.
"""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from agents.models import Agent, Tool
from review.verification import review_verify_chain
from runs import services, start, tool_batch
from runs.models import ApprovalRequest, Run, RunEvent
from tests import factories
from tests.review.test_trust_chain import _offline
from tests.review.test_trust_chain_approvals import _gated, _loosen
from warrant_verify.approvals import Seen, parse_time, verify_approval_history

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


def _queued() -> Run:
    """A run that will call delete_account once, frozen and left in the queue."""
    if not Agent.objects.filter(slug="replayer").exists():
        factories.replay_agent(Tool.objects.get(name="delete_account"))
    calls = [{"name": "delete_account", "arguments": {"account_id": "A-200"}}]
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(start, "claimed_here", lambda: None)
        patched.setattr(start, "enqueue", lambda run_id, known=None: None)
        run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps({"turns": [calls]}),
                                    caller=User.objects.get(username="operator"))
    return run


def _deleted(run: Run | None = None) -> Run:
    """Run (or start and run) a call of delete_account, approved by secops' approver if it waits."""
    run = run or _queued()
    services.run_advance(run_id=run.id)
    for approval in ApprovalRequest.objects.filter(run=run, status="pending"):
        services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"),
                                 approve=True)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def _called(run: Run) -> RunEvent:
    return RunEvent.objects.get(run=run, kind="tool_call", data__name="delete_account")


def test_requires_approval_lifted_by_an_update_between_two_runs_fails_offline(demo, tmp_path):
    # Gated as it was registered (no change of it sealed; a one-step tightening would be, and the server
    # would hold the tool to it: test_trust_chain_tightening.py).
    Tool.objects.filter(name="delete_account").update(requires_approval=True,
                                                      approver_role=Group.objects.get(name="secops"))
    gated = _deleted()
    assert _called(gated).data["approval"] == {"requires_approval": True, "approver_role": "secops"}
    Tool.objects.filter(name="delete_account").update(requires_approval=False)  # the DBA: no proposal, no record
    loose = _deleted()
    assert _called(loose).data["approval"] == {"requires_approval": False, "approver_role": "secops"}
    assert review_verify_chain().valid  # no sealed approval change of the tool: the server holds it to nothing
    status, out = _offline(tmp_path)
    assert status == 1, out
    failing = [line for line in out.splitlines() if "loosened with no record" in line]
    assert failing == [
        f"events.jsonl: run {loose.id} event {_called(loose).seq}: delete_account ran with no approval required "
        f"(approver role 'secops'), but run {gated.id} event {_called(gated).seq} saw approval required (approver "
        "role 'secops'), and no sealed approval change of it in trust.jsonl lies between them: its approval was "
        "loosened with no record"], out


def test_a_two_admin_loosening_between_the_runs_and_a_later_tightening_pass_offline(demo, tmp_path):
    _gated("secops")
    _deleted()
    _loosen(Tool.objects.get(name="delete_account"), {"requires_approval": False})
    _deleted()
    _gated("operators")  # tightened again, one step, not sealed: tighter later is no finding
    assert _called(_deleted()).data["approval"] == {"requires_approval": True, "approver_role": "operators"}
    status, out = _offline(tmp_path)
    assert status == 0, out


def test_runs_are_ordered_by_when_their_governance_was_frozen_not_when_they_started(demo, tmp_path):
    """A run frozen with delete_account ungated waits in the queue; a governance admin gates the tool
    in one step, and a run frozen after that runs first. By start, the gated run comes first and the
    waiting run looks like a loosening; by freeze (run_created's frozen_at) it is the tightening it was."""
    waiting = _queued()
    _gated("secops")
    gated = _deleted()
    waiting = _deleted(waiting)
    assert waiting.started_at > gated.started_at
    frozen = {run: parse_time(RunEvent.objects.get(run=run, kind="run_created").data["frozen_at"])
              for run in (waiting, gated)}
    assert frozen[waiting] < frozen[gated]
    assert _called(waiting).data["approval"] == {"requires_approval": False, "approver_role": None}
    status, out = _offline(tmp_path)
    assert status == 0, out


def test_traces_from_before_the_field_are_not_checked(demo, tmp_path, monkeypatch):
    """A run from an older harness recorded no approval: nothing earlier in the bundle saw the tool
    gated, so the loosening after it cannot be placed (the limit docs/evidence.md states)."""
    _gated("secops")
    with monkeypatch.context() as patched:
        patched.setattr(tool_batch, "_frozen_approval", lambda tool: None)
        old = _deleted()
    assert "approval" not in _called(old).data
    Tool.objects.filter(name="delete_account").update(requires_approval=False)
    _deleted()
    status, out = _offline(tmp_path)
    assert status == 0, out


def test_a_call_that_needed_approval_and_names_none_fails_offline(demo, tmp_path, monkeypatch):
    """A patched harness says the run's snapshot required approval of a call that then ran unasked."""
    monkeypatch.setattr(tool_batch, "_frozen_approval", lambda tool: {"requires_approval": True,
                                                                      "approver_role": "secops"})
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    run.refresh_from_db()
    called = RunEvent.objects.filter(run=run, kind="tool_call").order_by("seq").first()
    assert run.status == "succeeded" and called.data["approval_id"] is None
    status, out = _offline(tmp_path)
    assert status == 1 and (f"events.jsonl: run {run.id} event {called.seq}: {called.data['name']} ran with approval "
                            "required (approver role 'secops'), but the trace names no approval_id or "
                            "standing_approval_id for the call") in out, out


def _seen(at: str, run: str, tool: str = "docs__delete", *, required: bool = True, role: str | None = "secops"):
    return Seen(at=parse_time(at), order=(0, 1), run_id=run, event=1, tool=tool, requires_approval=required,
                approver_role=role)


def test_a_role_changed_is_held_to_a_change_of_the_tool_or_its_source():
    gated, moved = _seen("2026-01-01T10:00:00Z", "r0"), _seen("2026-01-01T11:00:00Z", "r1", role="operators")
    failures = verify_approval_history([moved, gated], {})
    assert [f.record for f in failures] == ["run r1 event 1"] and "of it or its source" in failures[0].reason
    sealed_at = parse_time("2026-01-01T10:30:00Z")
    assert verify_approval_history([gated, moved], {("tool_source", "docs"): [sealed_at]}) == []
    assert verify_approval_history([gated, moved], {("tool", "docs__delete"): [sealed_at]}) == []
    # A sealed change outside the window (before the gated run) does not stand for this one.
    assert verify_approval_history([gated, moved], {("tool", "docs__delete"): [parse_time("2026-01-01T09:00:00Z")]})
    lifted = _seen("2026-01-01T11:00:00Z", "r1", required=False)
    assert verify_approval_history([gated, lifted], {("tool_source", "docs"): [sealed_at]}), \
        "lifting requires_approval is the tool's own change, not its source's"
    named = _seen("2026-01-01T09:00:00Z", "r", required=False, role=None)
    assert verify_approval_history([named, gated], {}) == []  # tighter later
