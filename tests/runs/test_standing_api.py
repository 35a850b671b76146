"""Standing approvals over the API and in the workbench: grant, list, read, revoke."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from runs.models import StandingApproval

pytestmark = pytest.mark.django_db

API = "/api/v1/standing-approvals/"
EXACT = {"to": {"equals": "dana.whitfield@example.com"}, "subject": {"in": ["Renewal", "Welcome"]},
         "body": {"equals": "Hello"}}


def _body(**values) -> dict:
    return {"tool": "send_email", "arguments": EXACT, "role": "secops", "reason": "renewal mail",
            "expires_at": (timezone.now() + timedelta(days=3)).isoformat()} | values


def test_an_approver_grants_one_and_everyone_entitled_reads_it(approver, compliance, operator):
    response = approver.post(API, _body(), format="json")
    assert response.status_code == 201, response.content
    made = response.json()
    assert {k: made[k] for k in ("tool", "agent", "arguments", "role", "granted_by", "granted_via", "state", "uses")} == {
        "tool": "send_email", "agent": None, "arguments": EXACT, "role": "secops", "granted_by": "approver",
        "granted_via": "forced", "state": "active", "uses": 0}  # force_authenticate: auth_via says so
    assert [s["id"] for s in approver.get(API).json()["results"]] == [made["id"]]
    assert compliance.get(API + f"{made['id']}/").json()["id"] == made["id"]
    assert operator.get(API).json()["results"] == []
    assert operator.get(API + f"{made['id']}/").status_code == 404


@pytest.mark.parametrize("change, field", [
    ({"expires_at": (timezone.now() + timedelta(days=45)).isoformat()}, "expires_at"),
    ({"arguments": {"to": {"equals": "dana.whitfield@example.com"}}}, "arguments"),
    ({"arguments": EXACT | {"to": {"matches": ".*"}}}, "arguments"),
    ({"tool": "no_such_tool"}, "tool"),
    ({"agent": "no-such-agent"}, "agent"),
    ({"reason": "  "}, "reason"),
])
def test_a_grant_that_breaks_a_rule_is_refused_with_the_field(approver, change, field):
    response = approver.post(API, _body(**change), format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["details"], error
    assert not StandingApproval.objects.exists()


def test_outside_the_roles_authority_is_forbidden(approver, compliance, admin):
    assert compliance.post(API, _body(), format="json").status_code == 403
    refused = admin.post(API, _body(), format="json")
    assert refused.status_code == 403 and "only members of 'secops'" in refused.json()["error"]["message"]
    refused = approver.post(API, _body(tool="list_open_tickets", arguments={"account_id": {"equals": "A-100"}}),
                            format="json")
    assert refused.status_code == 403 and "outside the role's authority" in refused.json()["error"]["message"]
    assert not StandingApproval.objects.exists()


def test_revoke_then_revoke_again_is_a_conflict_and_the_filter_tells_them_apart(approver, compliance):
    made = approver.post(API, _body(), format="json").json()
    assert compliance.post(API + f"{made['id']}/revoke/", {}, format="json").status_code == 403
    revoked = approver.post(API + f"{made['id']}/revoke/", {"reason": "campaign over"}, format="json")
    assert revoked.status_code == 200, revoked.content
    assert {k: revoked.json()[k] for k in ("state", "revoked_by", "revoke_reason")} == {
        "state": "revoked", "revoked_by": "approver", "revoke_reason": "campaign over"}
    again = approver.post(API + f"{made['id']}/revoke/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    assert approver.get(API + "?active=true").json()["results"] == []
    assert [s["id"] for s in approver.get(API + "?active=false").json()["results"]] == [made["id"]]


def test_the_workbench_lists_them_and_revokes_through_the_service(approver):
    made = approver.post(API, _body(), format="json").json()
    browser = Client()
    browser.force_login(User.objects.get(username="approver"))
    page = browser.get("/admin/runs/standingapproval/")
    assert page.status_code == 200 and "send_email" in page.content.decode() and "secops" in page.content.decode()
    assert browser.get(f"/admin/runs/standingapproval/{made['id']}/change/").status_code == 200
    done = browser.post("/admin/runs/standingapproval/", {"action": "revoke_selected", "_selected_action": [made["id"]]},
                        follow=True)
    assert "Revoked 1 standing approval" in done.content.decode()
    standing = StandingApproval.objects.get(id=made["id"])
    assert standing.revoked_by.username == "approver" and standing.revoke_reason == "revoked in the workbench"


def test_the_workbench_refuses_a_revoke_the_service_refuses(approver):
    made = approver.post(API, _body(), format="json").json()
    browser = Client()
    browser.force_login(User.objects.get(username="compliance"))
    done = browser.post("/admin/runs/standingapproval/", {"action": "revoke_selected", "_selected_action": [made["id"]]},
                        follow=True)
    assert "only its granter" in done.content.decode()
    assert StandingApproval.objects.get(id=made["id"]).revoked_at is None


def _grant_page(username: str, **values):
    browser = Client()
    browser.force_login(User.objects.get(username=username))
    data = {"tool": "send_email", "agent": "", "role": "secops", "arguments": json.dumps(EXACT),
            "reason": "renewal mail", "days": "7"} | values
    return browser.post("/admin/runs/standingapproval/grant/", data, follow=True)


def test_the_workbench_grants_through_the_service(approver):
    done = _grant_page("approver")
    assert "Granted standing approval" in done.content.decode()
    granted = StandingApproval.objects.get()
    assert (granted.tool, granted.role.name, granted.granted_by.username, granted.granted_via) == (
        "send_email", "secops", "approver", "session")
    assert granted.arguments == EXACT and granted.agent is None


def test_the_workbench_grant_page_shows_the_services_refusal(approver):
    page = _grant_page("approver", arguments=json.dumps({"to": EXACT["to"]}))
    assert page.status_code == 200 and "the argument pattern is not usable" in page.content.decode()
    page = _grant_page("compliance", role="compliance")  # compliance's own role: no policy asks it about send_email
    assert "outside the role&#x27;s authority" in page.content.decode()
    assert not StandingApproval.objects.exists()
