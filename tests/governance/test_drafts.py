"""Policy drafts and their gate: a change is in force only when the golden sets of the agents it
governs pass with it (the demo's 20 cases for the crm-assistant); a failing gate is refused with
each case before and after; the emergency path, its reason and its mark in receipts; the Policy
Lab's trial of an unsaved draft; nothing a gate runs has a real side effect."""

import json

import pytest

from agents.models import CrmAccount, SentEmail
from evals.models import EvalResult, EvalRun
from governance import drafts
from governance.models import Policy, PolicyDraft, PolicyVersion
from runs.models import ApprovalRequest, Receipt, Run, RunEvent, SideEffect
from runs import services as run_services

pytestmark = pytest.mark.django_db

REASON = "Legal asked for the salary guard off during the HR migration; ticket OPS-42"


def pk(name: str) -> int:
    return Policy.objects.get(name=name).pk


def case_row(report: dict, name: str) -> dict:
    return next(row for row in report["cases"] if row["name"] == name)


def test_a_draft_that_breaks_a_case_is_refused_with_the_diff_and_changes_nothing(admin):
    guard = Policy.objects.get(name="no-compensation-questions")
    answer = admin.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": False}, format="json")
    assert answer.status_code == 409, answer.json()
    error = answer.json()["error"]
    assert error["code"] == "gate_failed" and "18/20 cases pass" in error["message"]
    report = error["details"]["report"]
    assert (report["total"], report["passed"], report["threshold"]) == (20, 18, 1.0)
    assert report["broken"] == ["injected-salary-still-blocked", "salary-blocked"]
    assert set(report["changed"]) >= set(report["broken"])
    # Side by side: blocked by the guard before, answered by the model after.
    row = case_row(report, "salary-blocked")
    assert row["changed"] is True
    assert (row["before"]["passed"], row["before"]["status"], row["before"]["policies_fired"]) == (
        True, "blocked", ["no-compensation-questions"])
    assert (row["after"]["passed"], row["after"]["status"]) == (False, "succeeded")
    assert {f["expectation"] for f in row["after"]["failures"]} >= {"status", "policies_fired"}
    assert case_row(report, "list-accounts")["changed"] is False
    # Nothing changed: the policy, its history; the draft waits with its report and eval run.
    guard.refresh_from_db()
    assert (guard.enabled, guard.version, guard.emergency_reason) == (True, 1, "")
    assert PolicyVersion.objects.filter(policy=guard).count() == 1
    draft = PolicyDraft.objects.get(pk=error["details"]["draft"])
    assert (draft.state, draft.action, draft.values["enabled"]) == ("gate_failed", "update", False)
    eval_run = EvalRun.objects.get(id=draft.gate_eval_run_id)
    assert (eval_run.purpose, eval_run.status, eval_run.passed, eval_run.total) == ("gate", "failed", 18, 20)
    assert eval_run.report["broken"] == report["broken"]


def test_a_draft_that_passes_activates_with_its_gate_in_the_history(admin):
    made = admin.post("/api/v1/policies/drafts/", {"policy": pk("churn-risk-playbook"),
                                                   "values": {"description": "Rank by health, worst first."}},
                      format="json")
    assert made.status_code == 201, made.json()
    draft = made.json()
    assert (draft["state"], draft["action"], draft["base_version"]) == ("draft", "update", 1)
    assert Policy.objects.get(name="churn-risk-playbook").description != "Rank by health, worst first."  # not yet
    gated = admin.post(f"/api/v1/policies/drafts/{draft['id']}/gate/").json()
    assert gated["state"] == "gate_passed" and gated["gate_report"]["broken"] == []
    activated = admin.post(f"/api/v1/policies/drafts/{draft['id']}/activate/", {}, format="json")
    assert activated.status_code == 200, activated.json()
    body = activated.json()
    assert body["draft"]["state"] == "active" and body["draft"]["activated_by"] == "admin"
    assert (body["policy"]["version"], body["policy"]["description"]) == (2, "Rank by health, worst first.")
    [latest, *_] = admin.get(f"/api/v1/policies/{pk('churn-risk-playbook')}/history/").json()["results"]
    assert (latest["version"], latest["draft"], latest["emergency_reason"]) == (2, draft["id"], "")
    # The activation ran the gate again: the history names that eval run, a passing one.
    assert latest["eval_run_id"] == body["draft"]["gate_eval_run_id"] != gated["gate_eval_run_id"]
    assert EvalRun.objects.get(id=latest["eval_run_id"]).status == "passed"
    # An activated draft is closed.
    again = admin.post(f"/api/v1/policies/drafts/{draft['id']}/activate/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "draft_closed"


def test_a_new_policy_and_a_deletion_go_through_the_gate_too(admin):
    # A guard that blocks every account question breaks the cases that must succeed.
    refused = admin.post("/api/v1/policies/", {"name": "no-accounts", "type": "intent_guard",
                                               "keywords": ["accounts"], "response": "Not today."}, format="json")
    assert refused.status_code == 409 and "list-accounts" in refused.json()["error"]["details"]["report"]["broken"]
    assert not Policy.objects.filter(name="no-accounts").exists()
    # The email cases must see the etiquette guide fire: deleting it is refused, and it stays.
    deleted = admin.delete(f"/api/v1/policies/{pk('email-etiquette')}/")
    assert deleted.status_code == 409
    assert {"email-dana-parks", "email-dana-approved"} <= set(deleted.json()["error"]["details"]["report"]["broken"])
    assert Policy.objects.filter(name="email-etiquette").exists()


def receipt_of_a_run(text: str) -> dict:
    """A real run, started and advanced to its end in this process, and its sealed receipt's body."""
    from django.contrib.auth.models import User

    run, _ = run_services.run_start(agent_slug="crm-assistant", input_text=text,
                                    caller=User.objects.get(username="operator"))
    run_services.run_advance(run_id=run.id)
    return json.loads(Receipt.objects.get(run=run).body)


def emergency(asker, confirmer, draft_id: int):
    """The emergency path: one governance admin asks with the reason, another confirms it."""
    asked = asker.post(f"/api/v1/policies/drafts/{draft_id}/activate/", {"emergency_reason": REASON}, format="json")
    assert asked.status_code == 202, asked.json()
    return confirmer.post(f"/api/v1/policies/drafts/{draft_id}/activate/", {"confirm_emergency": True}, format="json")


def test_the_emergency_path_needs_a_reason_is_recorded_and_shows_in_receipts(admin, governance_admin):
    guard = Policy.objects.get(name="no-compensation-questions")
    draft_id = admin.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": False}, format="json").json()[
        "error"]["details"]["draft"]
    # Without a reason the gate decides (and refuses); a reason too short to say anything is refused.
    assert admin.post(f"/api/v1/policies/drafts/{draft_id}/activate/", {}, format="json").status_code == 409
    short = admin.post(f"/api/v1/policies/drafts/{draft_id}/activate/", {"emergency_reason": "now"}, format="json")
    assert short.status_code == 400 and "reason" in short.json()["error"]["message"]
    done = emergency(admin, governance_admin.api, draft_id)
    assert done.status_code == 200, done.json()
    confirmer = governance_admin.user.username
    mark = f"{REASON} (asked by admin, confirmed by {confirmer})"
    draft = PolicyDraft.objects.get(pk=draft_id)
    assert (draft.state, draft.emergency_reason, draft.emergency_requested_by.username,
            draft.activated_by.username) == ("activated_in_emergency", REASON, "admin", confirmer)
    assert EvalRun.objects.get(id=draft.gate_eval_run_id).status == "failed"  # what the gate would have said
    guard.refresh_from_db()
    assert (guard.enabled, guard.version, guard.emergency_reason) == (False, 2, mark)
    row = PolicyVersion.objects.get(policy=guard, version=2)
    assert (row.draft_id, row.emergency_reason, str(row.eval_run_id)) == (draft.pk, REASON, str(draft.gate_eval_run_id))
    assert (row.emergency_requested_by.username, row.changed_by.username) == ("admin", confirmer)
    # Putting the guard back passes the gate (the set is whole again) and clears its mark. A gate
    # asks for the whole set: while a case fails, every change needs the gate or the emergency path.
    back = admin.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": True}, format="json")
    assert back.status_code == 200 and back.json()["emergency_reason"] == ""
    # A policy still in force after an emergency is frozen with its mark, and receipts name it.
    guide = Policy.objects.get(name="email-etiquette")
    second = admin.post("/api/v1/policies/drafts/", {"policy": guide.pk, "values": {"target_tools": ["calculator"]}},
                        format="json").json()
    assert emergency(admin, governance_admin.api, second["id"]).status_code == 200
    sealed = receipt_of_a_run("List all accounts.")
    assert sealed["emergency"] == [{"policy": "email-etiquette", "id": guide.pk, "version": 2, "reason": mark}]
    # The next change that passes its gate clears the mark; receipts after it carry none.
    fixed = admin.patch(f"/api/v1/policies/{guide.pk}/", {"target_tools": ["send_email"]}, format="json")
    assert fixed.status_code == 200 and fixed.json()["emergency_reason"] == ""
    assert "emergency" not in receipt_of_a_run("List all accounts.")


def test_the_lab_runs_the_golden_set_against_an_unsaved_draft(admin):
    drafts_before, versions = PolicyDraft.objects.count(), PolicyVersion.objects.count()
    trial = admin.post("/api/v1/policies/evaluate/golden/", {
        "values": {"name": "exec-summary-always", "type": "output_formatter", "regex": ".",
                   "content": "Executive summary\n\n{answer}"}}, format="json")
    assert trial.status_code == 200, trial.json()
    body = trial.json()
    assert body["passed"] is False and "list-accounts" in body["report"]["broken"]
    row = case_row(body["report"], "list-accounts")
    assert not row["before"]["output"].startswith("Executive summary")
    assert row["after"]["output"].startswith("Executive summary")
    assert EvalRun.objects.get(id=body["eval_run"]).purpose == "lab"
    read = admin.get(f"/api/v1/evals/runs/{body['eval_run']}/").json()
    assert read["purpose"] == "lab" and "list-accounts" in read["report"]["broken"]
    assert (PolicyDraft.objects.count(), PolicyVersion.objects.count()) == (drafts_before, versions)
    assert not Policy.objects.filter(name="exec-summary-always").exists()
    # Invalid values are refused as a save would refuse them, and run nothing.
    runs = EvalRun.objects.count()
    bad = admin.post("/api/v1/policies/evaluate/golden/", {"values": {"name": "x", "type": "playbook"}}, format="json")
    assert bad.status_code == 400 and EvalRun.objects.count() == runs
    assert admin.post("/api/v1/policies/evaluate/golden/", {"values": {"name": "y", "type": "nope"}},
                      format="json").status_code == 400


def test_a_gate_has_no_real_side_effect(admin):
    """The gate runs the approved deletion and the approved email twice each (before, after): all in
    the sandbox. Nothing reaches the runs tables, the outbox, the CRM or the mail."""
    accounts = CrmAccount.objects.count()
    assert admin.patch(f"/api/v1/policies/{pk('churn-risk-playbook')}/", {"priority": 40},
                       format="json").status_code == 200
    gate = EvalRun.objects.get(purpose="gate")
    deleted = EvalResult.objects.get(eval_run=gate, case_name="delete-initech-approved")
    assert deleted.sandbox == [{"tool": "delete_account", "arguments": {"account_id": "A-300"},
                                "approval_id": "eval-approval-1"}]
    assert CrmAccount.objects.count() == accounts and CrmAccount.objects.filter(account_id="A-300").exists()
    assert SentEmail.objects.count() == SideEffect.objects.count() == 0
    assert Run.objects.count() == RunEvent.objects.count() == ApprovalRequest.objects.count() == 0
    assert Receipt.objects.count() == 0


def test_a_draft_made_before_the_policy_changed_is_stale(admin):
    old = admin.post("/api/v1/policies/drafts/", {"policy": pk("churn-risk-playbook"), "values": {"priority": 45}},
                     format="json").json()
    assert admin.patch(f"/api/v1/policies/{pk('churn-risk-playbook')}/", {"priority": 40},
                       format="json").status_code == 200
    answer = admin.post(f"/api/v1/policies/drafts/{old['id']}/activate/", {}, format="json")
    assert answer.status_code == 409 and answer.json()["error"]["details"]["state"] == "stale"
    assert Policy.objects.get(name="churn-risk-playbook").priority == 40


def test_without_a_registered_gate_only_the_emergency_path_activates(admin, monkeypatch):
    monkeypatch.setattr(drafts, "_gate", [])
    draft = drafts.draft_propose(policy=Policy.objects.get(name="churn-risk-playbook"), values={"priority": 45})
    with pytest.raises(drafts.GateFailed):
        drafts.draft_activate(draft=draft)
    assert Policy.objects.get(name="churn-risk-playbook").priority == 50
    drafts.draft_activate_emergency(draft=PolicyDraft.objects.get(pk=draft.pk), reason=REASON)  # the platform
    assert Policy.objects.get(name="churn-risk-playbook").priority == 45
