"""Finding 2 of issue 24: a superuser read the approver's API token in the admin
(/admin/authtoken/tokenproxy/, DRF's TokenAdmin, in plain text) and approved their own run with
it. No one, superusers included, can read or mint another user's token, set their password in
the workbench, or approve their own run by any way the web offers; every decision records how
its decider signed in."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from governance.models import ApiToken
from governance.tokens import token_issue
from runs.models import RunEvent
from tests import factories
from tests.runs.helpers import parked

pytestmark = pytest.mark.django_db
User = get_user_model()


def _key(username: str) -> tuple[ApiToken, str]:
    return token_issue(user=User.objects.get(username=username), via="command", issued_by="test")


def _superuser_web() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    return client


def _token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_no_admin_page_shows_a_token_key(demo):
    token, key = _key("approver")
    secret = key.rsplit("_", 1)[1]
    web = _superuser_web()
    assert web.get("/admin/authtoken/tokenproxy/").status_code == 404  # DRF's token admin is gone
    assert web.get("/admin/authtoken/token/").status_code == 404
    pages = [web.get("/admin/governance/apitoken/"), web.get(f"/admin/governance/apitoken/{token.pk}/change/"),
             web.get(f"/admin/auth/user/{token.user_id}/change/"), web.get("/admin/")]
    for page in pages:
        assert page.status_code == 200
        text = page.content.decode()
        assert secret not in text and token.digest not in text
    listing = pages[0].content.decode()
    assert token.public_id in listing and "approver" in listing  # prefix, owner, dates: what may be known


def test_a_superuser_cannot_mint_a_token_for_another_user_from_the_web(demo):
    web = _superuser_web()
    approver = User.objects.get(username="approver")
    assert web.get("/admin/governance/apitoken/add/").status_code == 403
    web.post("/admin/governance/apitoken/add/", {"user": approver.pk, "name": "mine now"})
    # The API issues only to the one asking, and names no other user.
    api = APIClient()
    api.force_login(User.objects.get(username="admin"))
    refused = api.post("/api/v1/tokens/", {"user": "approver"}, format="json")
    assert refused.status_code == 400 and "user" in refused.json()["error"]["details"]
    assert not ApiToken.objects.filter(user=approver).exists()


def test_a_superuser_cannot_read_or_revoke_another_users_token_over_the_api(demo):
    token, key = _key("approver")
    admin = _token_client(_key("admin")[1])
    listed = admin.get("/api/v1/tokens/").json()["results"]
    assert token.public_id not in [t["public_id"] for t in listed]
    assert admin.get(f"/api/v1/tokens/{token.public_id}/").status_code == 404
    assert admin.delete(f"/api/v1/tokens/{token.public_id}/").status_code == 404
    assert _token_client(key).get("/api/v1/approvals/").status_code == 200


def test_a_superuser_cannot_set_another_users_password_in_the_workbench(demo):
    web = _superuser_web()
    approver = User.objects.get(username="approver")
    before = approver.password
    assert web.get(f"/admin/auth/user/{approver.pk}/password/").status_code == 403
    web.post(f"/admin/auth/user/{approver.pk}/password/", {"password1": "now-i-am-you-1", "password2": "now-i-am-you-1"})
    approver.refresh_from_db()
    assert approver.password == before
    # Their own, they still may.
    own = User.objects.get(username="admin")
    assert web.get(f"/admin/auth/user/{own.pk}/password/").status_code == 200


def test_a_superuser_cannot_approve_their_own_run_by_any_way_the_web_offers(demo):
    admin = User.objects.get(username="admin")
    # In the operators' role to run the delete, and even in the approver role.
    admin.groups.add(*Group.objects.filter(name__in=["operators", "secops"]))
    approval = parked(user="admin")[1]
    url = f"/api/v1/approvals/{approval.id}/approve/"
    with_token = _token_client(_key("admin")[1]).post(url, {"reason": "mine"}, format="json")
    session = APIClient()
    session.force_login(admin)
    with_session = session.post(url, {"reason": "mine"}, format="json")
    web = _superuser_web()
    web.post(f"/admin/runs/approvalrequest/{approval.id}/decide/", {"decision": "approve", "reason": "mine"})
    assert with_token.status_code == with_session.status_code == 403
    # The way the finding took: the approver's key, read in the admin. It is not there to read.
    listing = web.get("/admin/governance/apitoken/").content.decode()
    assert not re.search(r"wt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", listing)
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_by is None


def test_a_decision_records_which_token_made_it(demo):
    token, key = _key("approver")
    approval = parked(user="operator")[1]
    answer = _token_client(key).post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "ok"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["decided_via"] == f"token:{token.public_id}"
    approval.refresh_from_db()
    assert approval.decided_via == f"token:{token.public_id}"
    event = RunEvent.objects.get(run=approval.run, kind="approval_decided")
    assert event.data["decided_via"] == f"token:{token.public_id}" and event.data["decided_by"] == "approver"
    # The token names its owner and how it came to exist.
    assert ApiToken.objects.get(public_id=token.public_id).issued_via == "command"


def test_a_decision_in_the_workbench_or_a_session_records_session(demo):
    first, second = parked(user="operator")[1], None
    web = Client()
    web.force_login(User.objects.get(username="approver"))
    web.post(f"/admin/runs/approvalrequest/{first.id}/decide/", {"decision": "deny", "reason": "no"})
    first.refresh_from_db()
    assert first.status == "denied" and first.decided_via == "session"
    second = parked(user="operator")[1]
    api = APIClient()
    api.force_login(User.objects.get(username="approver"))
    answer = api.post(f"/api/v1/approvals/{second.id}/approve/", {"reason": "ok"}, format="json")
    assert answer.status_code == 200 and answer.json()["decided_via"] == "session"
    queue = web.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert "Signed in by" in queue and "session" in queue


# --- someone holding only the database (a DBA, a restored backup) -------------------------------


def test_a_token_row_written_in_the_database_does_not_authenticate(demo):
    from governance.tokens import key_digest

    key = "wt_0123456789ab_" + "A" * 43
    ApiToken.objects.create(public_id="0123456789ab", digest=key_digest(key), user=User.objects.get(username="approver"),
                            issued_via="command", issued_by="root", seal="0" * 64)
    answer = _token_client(key).get("/api/v1/approvals/")
    assert answer.status_code == 401 and "Invalid token." in answer.content.decode()


def test_a_token_moved_to_another_user_in_the_database_does_not_authenticate(demo):
    token, key = _key("admin")  # the DBA's own account
    assert _token_client(key).get("/api/v1/tokens/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(user=User.objects.get(username="approver"))
    assert _token_client(key).get("/api/v1/approvals/").status_code == 401


def test_an_expired_token_extended_in_the_database_stays_refused(demo):
    import datetime

    from django.utils import timezone

    token, key = _key("approver")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() + datetime.timedelta(days=3650))
    assert _token_client(key).get("/api/v1/approvals/").status_code == 401


def test_the_admin_revokes_a_token_it_cannot_read(demo):
    token, key = _key("approver")
    web = _superuser_web()
    answer = web.post("/admin/governance/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert answer.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == "admin"
    assert _token_client(key).get("/api/v1/approvals/").status_code == 401


def test_an_account_the_caller_made_or_put_in_the_role_cannot_approve_their_run(demo):
    admin = User.objects.get(username="admin")
    admin.groups.add(Group.objects.get(name="operators"))
    web = _superuser_web()
    puppet = factories.made_in_admin(web, "puppet")
    factories.roles_set_in_admin(web, puppet, "secops", staff=True)
    assert puppet.groups.filter(name="secops").exists()
    approval = parked(user="admin")[1]
    as_puppet = APIClient()
    as_puppet.force_login(puppet)
    answer = as_puppet.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "mine"}, format="json")
    assert answer.status_code == 403 and "created your account" in answer.json()["error"]["message"]
    # The approver, whose account the caller never touched, still may.
    approver = APIClient()
    approver.force_login(User.objects.get(username="approver"))
    assert approver.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "ok"}, format="json").status_code == 200


def test_a_puppet_made_by_the_callers_puppet_cannot_approve_their_run(demo):
    """The caller makes a second superuser, who makes the approver: the caller touched neither
    the approver's account nor its roles, yet both accounts are theirs."""
    web = _superuser_web()
    deputy = factories.made_in_admin(web, "deputy")
    User.objects.filter(pk=deputy.pk).update(is_staff=True, is_superuser=True)
    as_deputy = Client()
    as_deputy.force_login(User.objects.get(pk=deputy.pk))
    puppet = factories.made_in_admin(as_deputy, "puppet2")
    factories.roles_set_in_admin(as_deputy, puppet, "secops")
    User.objects.get(username="admin").groups.add(Group.objects.get(name="operators"))
    approval = parked(user="admin")[1]
    as_puppet = APIClient()
    as_puppet.force_login(puppet)
    answer = as_puppet.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "mine"}, format="json")
    assert answer.status_code == 403 and "created your account" in answer.json()["error"]["message"]


def test_a_caller_rewritten_in_the_database_still_cannot_approve_their_run(demo):
    """A DBA in the approver role parks a run of their own, points runs_run.caller_id at someone
    else and approves: the run's snapshot and first event still name them."""
    from runs.models import Run

    dba = User.objects.get(username="approver")
    dba.groups.add(Group.objects.get(name="operators"))
    approval = parked(user="approver")[1]
    Run.objects.filter(pk=approval.run_id).update(caller=User.objects.get(username="operator"))
    as_dba = APIClient()
    as_dba.force_login(dba)
    answer = as_dba.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "mine"}, format="json")
    assert answer.status_code == 403 and "own run" in answer.json()["error"]["message"]


def test_a_puppet_made_after_the_run_parked_cannot_approve_it_either(demo):
    """What the caller set up is kept under the governance stamp from the park's notice on (the
    approvers it tells are those the caller did not set up): an account the caller makes and puts in
    the role afterwards moves the stamp, so the decision reads it again."""
    admin = User.objects.get(username="admin")
    admin.groups.add(Group.objects.get(name="operators"))
    from runs.notify import approvers, read_request

    approval = parked(user="admin")[1]
    # Who the park's notice tells (its approvers): this reads what admin had set up then, nobody yet.
    assert "approver" in {user.username for user in approvers(read_request(approval.id))}
    web = _superuser_web()
    puppet = factories.made_in_admin(web, "late-puppet")
    factories.roles_set_in_admin(web, puppet, "secops")
    as_puppet = APIClient()
    as_puppet.force_login(puppet)
    answer = as_puppet.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "mine"}, format="json")
    assert answer.status_code == 403 and "created your account" in answer.json()["error"]["message"]
