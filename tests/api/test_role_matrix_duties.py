"""Separation of duties the matrix relies on: only the approver role decides, and never on one's own run."""

import pytest
from django.contrib.auth.models import Group

from runs.models import ApprovalRequest
from tests.api.role_matrix import API
from tests.api.role_matrix_world import token_client, user_named

pytestmark = pytest.mark.django_db


def test_a_superuser_outside_the_approver_role_may_not_decide(world):
    url = API + f"approvals/{world.pending_approval_id}/approve/"
    response = token_client("admin").post(url, {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"] == {"code": "forbidden", "message": "only members of 'secops' may decide this request",
                                         "details": {}}


def test_no_one_approves_their_own_run_even_inside_the_approver_role(world):
    user_named("operator").groups.add(Group.objects.get(name="secops"))
    for action in ("approve", "deny"):
        response = token_client("operator").post(API + f"approvals/{world.pending_approval_id}/{action}/",
                                                 {"reason": "mine"}, format="json")
        assert response.status_code == 403 and response.json()["error"]["message"] == "no one approves their own run"
    assert ApprovalRequest.objects.get(id=world.pending_approval_id).status == "pending"
