"""The emergency path of policy drafts takes two governance admins: one asks with a reason, another
(neither the one who asked nor the draft's author) confirms it. A refusal writes nothing; the
platform (user None: load_demo, bootstrap) activates in one step."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.api_errors import Forbidden
from core.four_eyes import SecondAdminRequired
from evals.models import EvalRun
from governance import drafts
from governance.models import Policy, PolicyDraft, PolicyVersion
from tests import factories

pytestmark = pytest.mark.django_db

REASON = "Legal asked for the salary guard off during the HR migration; ticket OPS-42"


def activate(client, draft_id: int, body: dict):
    return client.post(f"/api/v1/policies/drafts/{draft_id}/activate/", body, format="json")


@pytest.fixture
def failed_draft(admin) -> PolicyDraft:
    """The guard switched off by `admin`: its gate fails (two cases break), so it waits as a draft."""
    guard = Policy.objects.get(name="no-compensation-questions")
    answer = admin.patch(f"/api/v1/policies/{guard.pk}/", {"enabled": False}, format="json")
    return PolicyDraft.objects.get(pk=answer.json()["error"]["details"]["draft"])


def written() -> tuple:
    """What an activation writes: the policy, its history, the drafts' states, the gate's eval runs."""
    guard = Policy.objects.get(name="no-compensation-questions")
    return ((guard.enabled, guard.version, guard.emergency_reason), PolicyVersion.objects.count(),
            sorted(PolicyDraft.objects.values_list("pk", "state", "activated_by")), EvalRun.objects.count())


def test_the_author_asks_but_may_not_confirm_and_nothing_is_written(admin, failed_draft):
    asked = activate(admin, failed_draft.pk, {"emergency_reason": REASON})
    assert asked.status_code == 202, asked.json()
    body = asked.json()
    assert (body["state"], body["emergency_reason"], body["emergency_requested_by"]) == ("gate_failed", REASON, "admin")
    assert body["emergency_requested_at"] and body["activated_by"] is None
    before = written()
    assert before[0] == (True, 1, "")  # asking puts nothing in force
    refused = activate(admin, failed_draft.pk, {"confirm_emergency": True})
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "second_admin_required" and "another governance admin must confirm" in error["message"]
    assert (error["details"]["emergency_requested_by"], error["details"]["created_by"]) == ("admin", "admin")
    # Asking again, with another reason, does not rewrite what a second admin is to confirm.
    again = activate(admin, failed_draft.pk, {"emergency_reason": "a different and better reason"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "emergency_pending"
    assert written() == before
    assert PolicyDraft.objects.get(pk=failed_draft.pk).emergency_reason == REASON


def test_a_second_governance_admin_confirms(admin, governance_admin, failed_draft):
    assert activate(admin, failed_draft.pk, {"emergency_reason": REASON}).status_code == 202
    done = activate(governance_admin.api, failed_draft.pk, {"confirm_emergency": True})
    assert done.status_code == 200, done.json()
    confirmer = governance_admin.user.username
    assert (done.json()["draft"]["state"], done.json()["draft"]["emergency_requested_by"],
            done.json()["draft"]["activated_by"]) == ("activated_in_emergency", "admin", confirmer)
    guard = Policy.objects.get(name="no-compensation-questions")
    assert (guard.enabled, guard.emergency_reason) == (False, f"{REASON} (asked by admin, confirmed by {confirmer})")
    history = admin.get(f"/api/v1/policies/{guard.pk}/history/").json()
    latest = history["results"][0] if isinstance(history, dict) else history[0]
    assert (latest["emergency_reason"], latest["emergency_requested_by"], latest["changed_by"]) == (
        REASON, "admin", confirmer)


def test_one_who_asked_for_another_admins_draft_may_not_confirm_it_nor_may_the_author(admin, failed_draft):
    asker, third = factories.governance_admin(), factories.governance_admin()
    assert activate(factories.api_client(asker), failed_draft.pk, {"emergency_reason": REASON}).status_code == 202
    before = written()
    for refused in (asker, failed_draft.created_by):
        answer = activate(factories.api_client(refused), failed_draft.pk, {"confirm_emergency": True})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "second_admin_required"
    assert written() == before
    assert activate(factories.api_client(third), failed_draft.pk, {"confirm_emergency": True}).status_code == 200
    row = PolicyVersion.objects.get(policy__name="no-compensation-questions", version=2)
    assert (row.emergency_requested_by, row.changed_by) == (asker, third)


def test_confirming_needs_a_request_and_asking_and_confirming_at_once_is_refused(governance_admin, failed_draft):
    before = written()
    none = activate(governance_admin.api, failed_draft.pk, {"confirm_emergency": True})
    assert none.status_code == 409 and none.json()["error"]["code"] == "no_emergency_request"
    both = activate(governance_admin.api, failed_draft.pk, {"emergency_reason": REASON, "confirm_emergency": True})
    assert both.status_code == 400 and "confirm_emergency" in both.json()["error"]["details"]
    assert written() == before
    assert PolicyDraft.objects.get(pk=failed_draft.pk).emergency_requested_at is None


def test_the_services_refuse_the_author_and_let_the_platform_through(admin, failed_draft):
    drafts.draft_request_emergency(draft=failed_draft, reason=REASON, user=failed_draft.created_by)
    before = written()
    with pytest.raises(SecondAdminRequired):
        drafts.draft_confirm_emergency(draft=PolicyDraft.objects.get(pk=failed_draft.pk), user=failed_draft.created_by)
    with pytest.raises(Forbidden):  # the platform does not confirm a person's request
        drafts.draft_confirm_emergency(draft=PolicyDraft.objects.get(pk=failed_draft.pk), user=None)
    assert written() == before
    # The platform's own emergency (no person asks, none confirms) is in force in one step.
    platform = drafts.draft_propose(policy=Policy.objects.get(name="churn-risk-playbook"), values={"priority": 45})
    drafts.draft_activate_emergency(draft=platform, reason=REASON)
    assert Policy.objects.get(name="churn-risk-playbook").emergency_reason == REASON
    assert PolicyDraft.objects.get(pk=platform.pk).state == "activated_in_emergency"


def test_a_request_not_confirmed_in_time_expires_and_may_be_asked_again(admin, governance_admin, failed_draft):
    assert activate(admin, failed_draft.pk, {"emergency_reason": REASON}).status_code == 202
    PolicyDraft.objects.filter(pk=failed_draft.pk).update(
        emergency_requested_at=timezone.now() - timedelta(hours=24, minutes=1))
    before = written()
    late = activate(governance_admin.api, failed_draft.pk, {"confirm_emergency": True})
    assert late.status_code == 409, late.json()
    assert late.json()["error"]["code"] == "request_expired" and "ask for it again" in late.json()["error"]["message"]
    assert written() == before
    # Expired, it no longer stands in the way of a new request, which a second admin then confirms.
    assert activate(governance_admin.api, failed_draft.pk, {"emergency_reason": REASON}).status_code == 202
    assert activate(admin, failed_draft.pk, {"confirm_emergency": True}).status_code == 403  # the author
    third = factories.api_client(factories.governance_admin())
    assert activate(third, failed_draft.pk, {"confirm_emergency": True}).status_code == 200


def test_an_admin_whose_account_the_asker_set_up_is_no_second_admin(admin, failed_draft):
    """A superuser who makes a governance admin in the workbench (Django's admin log) and has it
    confirm their own request is one person: refused, as a puppet approver is for runs."""
    from django.contrib.admin.models import ADDITION, LogEntry
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType

    asker = get_user_model().objects.get(username="admin")
    puppet = factories.governance_admin()
    LogEntry.objects.create(user=asker, content_type=ContentType.objects.get_for_model(get_user_model()),
                            object_id=str(puppet.pk), object_repr=puppet.username, action_flag=ADDITION,
                            change_message="[]")
    assert activate(admin, failed_draft.pk, {"emergency_reason": REASON}).status_code == 202
    before = written()
    refused = activate(factories.api_client(puppet), failed_draft.pk, {"confirm_emergency": True})
    assert refused.status_code == 403, refused.json()
    assert refused.json()["error"]["code"] == "second_admin_required"
    assert "was set up" in refused.json()["error"]["message"]
    assert written() == before
    assert activate(factories.api_client(factories.governance_admin()), failed_draft.pk,
                    {"confirm_emergency": True}).status_code == 200
