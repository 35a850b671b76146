"""Objects of another user are 404, never 403 (their existence is not disclosed); lists, exports and
idempotency keys are the caller's own."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from runs.models import Run
from tests.api.role_matrix import API
from tests.api.role_matrix_world import send, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_operator_client(demo):
    user = get_user_model().objects.create_user("operator2", password="x")
    user.groups.add(Group.objects.get(name="operators"))
    return token_client("operator2")


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "runs/{finished}/"),
    ("GET", "runs/{finished}/events/"),
    ("GET", "runs/{parked}/"),
    ("GET", "runs/{parked}/events/"),
    ("POST", "runs/{parked}/cancel/"),
    ("POST", "runs/{finished}/cancel/"),
    ("GET", "receipts/{receipt}/"),
    ("GET", "receipts/{receipt}/verify/"),
])
def test_another_operators_objects_are_404(world, second_operator_client, method, path):
    url = API + path.format(finished=world.finished_run_id, parked=world.parked_run_id, receipt=world.receipt_id)
    response = send(second_operator_client, method, url, {} if method == "POST" else None)
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"
    # The same answer as for an id that does not exist at all: nothing tells them apart.
    missing = url.replace(str(world.finished_run_id), "00000000-0000-0000-0000-000000000000").replace(
        str(world.parked_run_id), "00000000-0000-0000-0000-000000000000").replace(
        str(world.receipt_id), "00000000-0000-0000-0000-000000000000")
    assert send(second_operator_client, method, missing, {} if method == "POST" else None).json() == response.json()
    assert Run.objects.get(id=world.parked_run_id).status == "awaiting_approval"


def test_another_operators_runs_and_receipts_are_left_out_of_lists_and_exports(world, second_operator_client):
    world.finished_run, world.parked_run  # noqa: B018
    assert second_operator_client.get(API + "runs/").json()["count"] == 0
    assert second_operator_client.get(API + "receipts/").json()["count"] == 0
    export = second_operator_client.get(API + "receipts/export/?format=jsonl")
    assert export.status_code == 200 and export.content == b""
    assert token_client("operator").get(API + "runs/").json()["count"] == 2


def test_idempotency_keys_belong_to_their_caller(world, second_operator_client):
    body = {"agent": "crm-assistant", "input": "List all accounts.", "idempotency_key": "shared-key"}
    first = token_client("operator").post(API + "runs/", body, format="json")
    other = second_operator_client.post(API + "runs/", body, format="json")
    assert (first.status_code, other.status_code) == (201, 201)
    assert other.json()["id"] != first.json()["id"] and other.json()["caller"] == "operator2"
