"""A run that was refused something says so: denied, expired, refused at call time (its grant
revoked while it waited). Each shows in the API (field and filters), in the workbench's lists and
badges, and in the receipt, with why (issue #20 item 6)."""

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from governance.models import ToolGrant
from runs import outcome_refusals
from runs.approvals import approval_expire_due
from runs.models import ApprovalRequest, Receipt, Run
from tests.runs.helpers import republish, start

pytestmark = pytest.mark.django_db(transaction=True)  # runs advance on commit
DELETE = "Delete the account Initech."


def _browser(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def _denied(operator, approver) -> dict:
    run = start(operator, DELETE)
    answer = approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/deny/", {"reason": "not without the contract"},
                           format="json")
    assert answer.status_code == 200, answer.content
    return operator.get(f"/api/v1/runs/{run['id']}/").json()


def _expired(operator) -> dict:
    run = start(operator, DELETE)
    ApprovalRequest.objects.filter(run_id=run["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_expire_due() == 1
    return operator.get(f"/api/v1/runs/{run['id']}/").json()


def _revoked_while_waiting(operator, approver) -> dict:
    run = start(operator, DELETE)
    ToolGrant.objects.filter(role__name="operators", tool__name="delete_account").delete()
    answer = approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/approve/", {"reason": "ok"}, format="json")
    assert answer.status_code == 200, answer.content
    return operator.get(f"/api/v1/runs/{run['id']}/").json()


def _receipt_body(compliance, run: dict) -> dict:
    return compliance.get(f"/api/v1/receipts/{run['receipt_id']}/").json()["body"]


@pytest.mark.parametrize("case, kind, code", [
    ("denied", "denied", "denied"),
    ("expired", "expired", "denied"),
    ("revoked", "refused_at_call", "not_permitted"),
])
def test_a_refused_action_shows_in_the_api_the_workbench_and_the_receipt(operator, approver, compliance, case, kind,
                                                                         code):
    run = {"denied": lambda: _denied(operator, approver), "expired": lambda: _expired(operator),
           "revoked": lambda: _revoked_while_waiting(operator, approver)}[case]()
    # The model is told and answers: the run succeeds, yet did not do what it set out to do.
    assert run["status"] == "succeeded", run
    assert run["refused"] == {"count": 1, "kinds": [kind]}
    row = Run.objects.get(id=run["id"])
    assert (row.refused_count, row.refused_kinds) == (1, [kind])

    body = _receipt_body(compliance, run)
    approval = ApprovalRequest.objects.get(run_id=run["id"])
    [refused] = body["refused"]
    assert refused["tool"] == "delete_account" and refused["kind"] == kind and refused["code"] == code
    assert refused["approval_id"] == (str(approval.id) if case != "revoked" else None)
    assert refused["call_id"] == approval.call_id
    why = {"denied": "not without the contract", "expired": "expired before a decision; counts as denied",
           "revoked": "the caller's roles may not use 'delete_account'"}[case]
    assert refused["reason"] == why
    assert body["outcome"] == {"status": "succeeded", "refused": 1, "refused_kinds": [kind], "complete": False}
    assert compliance.get(f"/api/v1/receipts/{run['receipt_id']}/verify/").json()["valid"] is True

    wb = _browser("compliance")
    badge = "Succeeded · 1 refused"
    runs_page = wb.get("/admin/runs/run/").content.decode()
    assert badge in runs_page and "wb-refused" in runs_page
    assert badge in wb.get("/admin/runs/receipt/").content.decode()
    timeline = wb.get(f"/admin/runs/run/{run['id']}/change/").content.decode()
    assert badge in timeline and why.replace("'", "&#x27;") in timeline
    receipt = wb.get(f"/admin/runs/receipt/{Receipt.objects.get(run_id=run['id']).pk}/change/").content.decode()
    assert badge in receipt and f">{kind}<" in receipt
    # The approver's own list of decisions says how the run ended, too.
    if case != "expired":
        assert badge in _browser("approver").get("/admin/runs/approvalrequest/queue/").content.decode()


def test_a_run_that_did_everything_stays_green_everywhere(operator, approver, compliance):
    run = start(operator, DELETE)
    approver.post(f"/api/v1/approvals/{run['pending_approval']['id']}/approve/", {"reason": "asked"}, format="json")
    run = operator.get(f"/api/v1/runs/{run['id']}/").json()
    assert run["status"] == "succeeded" and run["refused"] == {"count": 0, "kinds": []}
    body = _receipt_body(compliance, run)
    assert body["refused"] == [] and body["outcome"]["complete"] is True
    page = _browser("compliance").get("/admin/runs/run/").content.decode()
    assert "wb-status-succeeded" in page and "refused</span>" not in page


def test_the_list_filters_find_refused_runs_and_their_kinds(operator, approver, compliance):
    plain = start(operator, "List all accounts.")
    denied = _denied(operator, approver)
    expired = _expired(operator)

    def ids(query: str, client=compliance) -> set[str]:
        answer = client.get(f"/api/v1/runs/?{query}")
        assert answer.status_code == 200, answer.content
        return {r["id"] for r in answer.json()["results"]}

    assert ids("refused=true") == {denied["id"], expired["id"]}
    assert ids("refused=false") == {plain["id"]}
    assert ids("refused_kind=denied") == {denied["id"]}
    assert ids("refused_kind=expired") == {expired["id"]}
    assert ids("refused_kind=budget_denied") == set()
    assert ids("refused=true&refused_kind=expired", client=operator) == {expired["id"]}
    bad = compliance.get("/api/v1/runs/?refused_kind=nonsense")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"

    wb = _browser("compliance")
    page = wb.get("/admin/runs/run/?refused=denied").content.decode()
    assert denied["id"][:8] in page and expired["id"][:8] not in page and plain["id"][:8] not in page
    page = wb.get("/admin/runs/run/?refused=no").content.decode()
    assert plain["id"][:8] in page and denied["id"][:8] not in page
    receipts = wb.get("/admin/runs/receipt/?refused=yes").content.decode()
    assert denied["id"][:8] in receipts and expired["id"][:8] in receipts and plain["id"][:8] not in receipts


def test_verification_catches_refusals_edited_after_sealing(operator, approver, compliance):
    run = _denied(operator, approver)
    Run.objects.filter(id=run["id"]).update(refused_count=0, refused_kinds=[])
    verdict = compliance.get(f"/api/v1/receipts/{run['receipt_id']}/verify/").json()
    assert verdict["valid"] is False
    assert any("refused count or kinds differ" in p["reason"] for p in verdict["failures"]), verdict


def _tool(call_id: str, name: str, envelope: dict) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": outcome_refusals.json.dumps(envelope)}


def test_which_envelopes_count_as_refusals():
    def error(code, message="m", **details):
        return {"ok": False, "code": code, "error": message} | ({"details": details} if details else {})

    state = {"messages": [
        {"role": "user", "content": "go"},
        _tool("c1", "get_account", {"ok": True, "data": {}}),
        _tool("c2", "nope", error("unknown_tool")),  # the model's mistake, not a refusal
        _tool("c3", "send_email", error("invalid_arguments")),
        _tool("c4", "send_email", error("denied", decision="denied", reason="no", approval_id="a4")),
        _tool("c5", "send_email", error("denied", decision="expired", reason="", approval_id="a5")),
        _tool("c6", "delete_account", error("not_permitted", "not granted")),
        _tool("c7", "send_email", error("tool_cap", "at most 1 send_email")),
        _tool("c8", "crm", error("timeout")),  # a failure, not a refusal
        _tool("c9", "crm", error("tool_held", "held")),
    ]}
    found = outcome_refusals.refusals(state)
    assert [(r["call_id"], r["kind"]) for r in found] == [
        ("c4", "denied"), ("c5", "expired"), ("c6", "refused_at_call"), ("c7", "tool_cap"), ("c9", "refused_at_call")]
    assert found[0]["reason"] == "no" and found[1]["reason"] == "m" and found[0]["approval_id"] == "a4"
    assert outcome_refusals.summary(found) == {
        "refused_count": 5, "refused_kinds": ["denied", "expired", "refused_at_call", "tool_cap"]}
    assert outcome_refusals.outcome("succeeded", [])["complete"] is True


def test_an_evidence_bundle_carries_the_refusals_and_the_offline_verifier_holds_them_to_the_receipt(
        operator, approver, tmp_path):
    from tests.evidence.test_bundle_export import export, named, verify

    run = _denied(operator, approver)
    bundle = export(tmp_path / "bundle")
    rows = [outcome_refusals.json.loads(line) for line in (bundle / "runs.jsonl").read_text().splitlines()]
    assert [(r["refused_count"], r["refused_kinds"]) for r in rows if r["id"] == run["id"]] == [(1, ["denied"])]
    assert verify(bundle).returncode == 0
    summary = (bundle / "summary.html").read_text()
    assert "Runs refused an action" in summary and run["id"] in summary.split("Runs refused an action")[1]
    Run.objects.filter(id=run["id"]).update(refused_count=0, refused_kinds=[])  # not append-only: a plain UPDATE
    result = verify(export(tmp_path / "edited"))
    assert result.returncode == 1 and named(result, "runs.jsonl"), result.stdout
    assert f"run {run['id']}: refused_count, refused_kinds differ from what its receipt sealed" in result.stdout


def test_a_call_over_its_tools_cap_is_a_tool_cap_refusal(operator, compliance):
    republish(tool_caps={"get_account": 1})
    run = start(operator, "How healthy are Acme Corp and Globex?")  # two get_account lookups, one allowed
    assert run["status"] == "succeeded" and run["refused"] == {"count": 1, "kinds": ["tool_cap"]}
    [refused] = _receipt_body(compliance, run)["refused"]
    assert (refused["tool"], refused["kind"], refused["code"], refused["approval_id"]) == (
        "get_account", "tool_cap", "tool_cap", None)
    assert compliance.get("/api/v1/runs/?refused_kind=tool_cap").json()["count"] == 1


@pytest.mark.parametrize("decide", ["deny", "expire"])
def test_a_budget_extension_refused_is_a_budget_denied_refusal(operator, approver, compliance, decide):
    from django.contrib.auth.models import Group

    republish(max_turns=1, budget_role=Group.objects.get(name="secops"))
    run = start(operator, "How healthy is Acme Corp?")
    assert run["status"] == "awaiting_budget"
    request = ApprovalRequest.objects.get(run_id=run["id"], kind="budget", status="pending")
    waiting = _browser("compliance").get("/admin/runs/run/?status=awaiting_budget").content.decode()
    assert run["id"][:8] in waiting and "wb-status-awaiting_budget" in waiting and ">Awaiting budget<" in waiting
    if decide == "deny":
        answer = approver.post(f"/api/v1/approvals/{request.id}/deny/", {"reason": "enough for today"}, format="json")
        assert answer.status_code == 200, answer.content
    else:
        ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert approval_expire_due() == 1
    run = operator.get(f"/api/v1/runs/{run['id']}/").json()
    assert (run["status"], run["stop_reason"]) == ("stopped", "max_turns")
    assert run["refused"] == {"count": 1, "kinds": ["budget_denied"]}
    [refused] = _receipt_body(compliance, run)["refused"]
    status = "denied" if decide == "deny" else "expired"
    assert refused == {"call_id": request.call_id, "tool": "", "kind": "budget_denied", "code": status,
                       "reason": "enough for today" if decide == "deny" else "expired before a decision; counts as denied",
                       "approval_id": str(request.id)}
    assert compliance.get(f"/api/v1/receipts/{run['receipt_id']}/verify/").json()["valid"] is True
    assert "Stopped · 1 refused" in _browser("compliance").get("/admin/runs/run/").content.decode()


def test_the_dashboard_counts_the_runs_refused_an_action_and_links_to_them(operator, approver):
    start(operator, "List all accounts.")
    denied = _denied(operator, approver)
    wb = _browser("compliance")
    page = wb.get("/admin/").content.decode()
    [href] = re.findall(r'<a href="([^"]+)"><strong>1</strong> runs refused an action</a>', page)
    listed = wb.get(html.unescape(href)).content.decode()
    assert "refused=yes" in href and denied["id"][:8] in listed and "1 run" in listed
