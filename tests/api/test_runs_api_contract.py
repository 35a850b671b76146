"""The run, approval and receipt endpoints as an integrator meets them: keys, filters, limits, export."""

import csv
import io
import json

import pytest
from django.core.cache import cache
from django.test import override_settings

from warrant.schema import SOMETHING_BUT_SPACES
from runs.models import ApprovalRequest, IdempotencyRecord, Run
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    cache.clear()
    yield
    cache.clear()


def _parked(operator) -> dict:
    return start(operator, "Delete the account Initech.")


def test_an_approval_decision_replays_under_the_same_key(operator, approver):
    approval_id = _parked(operator)["pending_approval"]["id"]
    url = f"/api/v1/approvals/{approval_id}/approve/"
    first = approver.post(url, {"reason": "ok"}, format="json", HTTP_IDEMPOTENCY_KEY="decide-1")
    again = approver.post(url, {"reason": "ok"}, format="json", HTTP_IDEMPOTENCY_KEY="decide-1")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()
    different = approver.post(url, {"reason": "changed my mind"}, format="json", HTTP_IDEMPOTENCY_KEY="decide-1")
    assert different.status_code == 422 and different.json()["error"]["code"] == "unprocessable"
    # Without a key a second decision is the plain conflict it always was.
    assert approver.post(url, {}, format="json").status_code == 409


def test_a_run_started_again_under_its_key_is_the_same_run_as_it_is_now(operator, approver):
    body = {"agent": "crm-assistant", "input": "Delete the account Initech."}
    first = operator.post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert first.status_code == 201 and first.json()["status"] == "awaiting_approval"
    approval_id = first.json()["pending_approval"]["id"]
    assert approver.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json").status_code == 200
    again = operator.post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"] and again.json()["status"] == "succeeded"
    assert again.json() == operator.get(f"/api/v1/runs/{first.json()['id']}/").json()
    assert Run.objects.count() == 1


def test_a_refused_request_leaves_its_key_free_for_the_corrected_one(operator, approver):
    approval_id = _parked(operator)["pending_approval"]["id"]
    url = f"/api/v1/approvals/{approval_id}/deny/"
    refused = approver.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="deny-1")
    assert refused.status_code == 400 and set(refused.json()["error"]["details"]) == {"reason"}
    denied = approver.post(url, {"reason": "not this account"}, format="json", HTTP_IDEMPOTENCY_KEY="deny-1")
    assert denied.status_code == 200 and denied.json()["status"] == "denied"
    again = approver.post(url, {"reason": "not this account"}, format="json", HTTP_IDEMPOTENCY_KEY="deny-1")
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == denied.json()
    # A decision already taken is a conflict, reason or none: nobody writes one to learn that.
    from django.contrib.auth.models import User

    from core.api_errors import Conflict
    from runs.services import approval_decide

    with pytest.raises(Conflict, match="already decided"):
        approval_decide(via="session", approval_id=approval_id, user=User.objects.get(username="approver"), approve=False)


def test_a_request_whose_twin_is_in_flight_is_a_409(operator, approver):
    from django.contrib.auth.models import User

    approval_id = _parked(operator)["pending_approval"]["id"]
    url = f"/api/v1/approvals/{approval_id}/approve/"
    # The twin got as far as recording its key; it has not answered yet.
    import hashlib

    body = json.dumps(["POST", url, {"reason": ""}], sort_keys=True, default=str)
    IdempotencyRecord.objects.create(user=User.objects.get(username="approver"), key="twin",
                                     request_sha256=hashlib.sha256(body.encode()).hexdigest())
    response = approver.post(url, {"reason": ""}, format="json", HTTP_IDEMPOTENCY_KEY="twin")
    assert response.status_code == 409 and "still being processed" in response.json()["error"]["message"]
    assert ApprovalRequest.objects.get(id=approval_id).status == "pending"


def test_an_overlong_idempotency_key_is_refused(operator):
    response = operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."},
                             format="json", HTTP_IDEMPOTENCY_KEY="k" * 129)
    assert response.status_code == 422 and Run.objects.count() == 0


def test_runs_filter_by_status_agent_caller_and_date(operator, compliance, second_operator):
    start(operator, "List all accounts.")
    parked = start(operator, "Delete the account Initech.")
    start(second_operator, "List all accounts.")
    listing = compliance.get("/api/v1/runs/?status=awaiting_approval").json()
    assert [r["id"] for r in listing["results"]] == [parked["id"]]
    assert compliance.get("/api/v1/runs/?caller=operator2").json()["count"] == 1
    assert compliance.get("/api/v1/runs/?agent=crm-assistant").json()["count"] == 3
    assert compliance.get("/api/v1/runs/?agent=nobody").json()["count"] == 0
    assert compliance.get("/api/v1/runs/?created_after=2000-01-01T00:00:00Z").json()["count"] == 3
    assert compliance.get("/api/v1/runs/?created_before=2000-01-01T00:00:00Z").json()["count"] == 0
    assert compliance.get("/api/v1/runs/?status=not-a-status").status_code == 400
    assert operator.get("/api/v1/runs/?limit=1").json()["next"] is not None


def test_approvals_filter_by_status_and_role(operator, approver, compliance):
    _parked(operator)
    assert approver.get("/api/v1/approvals/?status=pending&role=secops").json()["count"] == 1
    assert approver.get("/api/v1/approvals/?status=approved").json()["count"] == 0
    assert compliance.get("/api/v1/approvals/?role=operators").json()["count"] == 0


def test_receipts_export_as_json_lines_and_csv(operator, compliance):
    start(operator, "List all accounts.")
    start(operator, "What is Dana Whitfield's salary?")
    jsonl = compliance.get("/api/v1/receipts/export/?format=jsonl")
    assert jsonl.status_code == 200 and jsonl["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in jsonl.content.decode().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2] and lines[1]["prev_hash"] == lines[0]["hash"]
    assert lines[1]["body"]["status"] == "blocked"
    blocked_only = compliance.get("/api/v1/receipts/export/?format=jsonl&status=blocked").content.decode()
    assert len(blocked_only.splitlines()) == 1
    rows = list(csv.reader(io.StringIO(compliance.get("/api/v1/receipts/export/?format=csv").content.decode())))
    assert rows[0][:3] == ["seq", "id", "run_id"] and len(rows) == 3


def test_an_export_larger_than_a_file_comes_in_parts_that_say_so(operator, compliance, monkeypatch):
    monkeypatch.setattr("runs.receipts_export.EXPORT_LIMIT", 2)
    for _ in range(3):
        start(operator, "List all accounts.")
    first = compliance.get("/api/v1/receipts/export/?format=jsonl&status=succeeded")
    assert first.status_code == 200 and first["Warrant-Export-Complete"] == "false"
    assert [json.loads(line)["seq"] for line in first.content.decode().splitlines()] == [1, 2]
    link, rel = first["Link"].split("; ")
    assert rel == 'rel="next"' and "seq_after=2" in link and "status=succeeded" in link and "format=jsonl" in link
    second = compliance.get(link.strip("<>").removeprefix("http://testserver"))
    assert second["Warrant-Export-Complete"] == "true" and "Link" not in second
    assert [json.loads(line)["seq"] for line in second.content.decode().splitlines()] == [3]
    whole = compliance.get("/api/v1/receipts/export/?format=jsonl&seq_after=0&status=succeeded")
    assert whole["Warrant-Export-Complete"] == "false"  # still the first part: same limit


def test_the_export_schema_says_how_to_read_the_next_part(compliance):
    operation = compliance.get("/api/v1/schema/?format=json").json()["paths"]["/api/v1/receipts/export/"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    assert params["format"]["schema"]["enum"] == ["bundle", "csv", "jsonl"] and params["format"]["required"] is True
    assert params["seq_after"]["schema"] == {"type": "integer", "minimum": 0, "maximum": 2147483647}
    headers = operation["responses"]["200"]["headers"]
    assert headers["Warrant-Export-Complete"]["required"] is True and "Link" in headers


@pytest.mark.parametrize("value", ["-1", "1.5", "x", "2147483648", ""])
def test_seq_after_is_a_chain_position(compliance, value):
    response = compliance.get(f"/api/v1/receipts/export/?format=jsonl&seq_after={value}")
    assert response.status_code == 400 and "seq_after" in response.json()["error"]["details"]


def test_csv_export_neutralises_spreadsheet_formulas(operator, compliance):
    from django.contrib.auth.models import Group, User
    from rest_framework.test import APIClient

    sly = User.objects.create_user("=HYPERLINK(1)")
    sly.groups.add(Group.objects.get(name="operators"))
    client = APIClient()
    client.force_authenticate(sly)
    start(client, "List all accounts.")
    text = compliance.get("/api/v1/receipts/export/?format=csv").content.decode()
    row = list(csv.reader(io.StringIO(text)))[1]
    assert row[6] == "'=HYPERLINK(1)"


def test_an_operator_exports_only_their_own_receipts(operator, second_operator):
    start(operator, "List all accounts.")
    start(second_operator, "List all accounts.")
    assert len(second_operator.get("/api/v1/receipts/export/?format=jsonl").content.decode().splitlines()) == 1


def test_run_creation_is_throttled_with_the_error_body(operator):
    from rest_framework.settings import api_settings

    rates = {**api_settings.DEFAULT_THROTTLE_RATES, "run_create": "2/min"}
    with override_settings(REST_FRAMEWORK={**_rest(), "DEFAULT_THROTTLE_RATES": rates}):
        codes = [operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."},
                               format="json").status_code for _ in range(3)]
        assert codes == [201, 201, 429]
        response = operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "x"}, format="json")
        assert response.json()["error"]["code"] == "throttled" and "Retry-After" in response.headers
        assert operator.get("/api/v1/runs/").status_code == 200  # reading is not throttled
    assert Run.objects.count() == 2


def _rest() -> dict:
    from django.conf import settings

    return settings.REST_FRAMEWORK


def test_an_oversized_body_is_refused_with_the_error_body(operator):
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        response = operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "x" * 5000}, format="json")
    assert response.status_code == 413, response.content
    assert response.json()["error"]["code"] == "request_too_large"
    assert Run.objects.count() == 0


def test_routing_errors_carry_the_error_body(operator):
    assert operator.get("/api/v1/nothing-here/").json()["error"]["code"] == "not_found"
    response = operator.delete("/api/v1/runs/")
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"


def test_the_schema_and_its_viewer_are_served_without_a_cdn(operator):
    schema = operator.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200 and schema.json()["openapi"].startswith("3.")
    docs = operator.get("/api/v1/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower() and "https://" not in docs


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "limit=abc", "offset=-1", "offset=null",
                                   "offset=99999999999999999999", "offset=1&offset=2", "limit=%C2%B2"])
def test_pagination_parameters_it_cannot_honour_are_refused(compliance, query):
    response = compliance.get(f"/api/v1/runs/?{query}")
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) <= {"limit", "offset"}


def test_every_operation_documents_its_error_answers(compliance):
    schema = compliance.get("/api/v1/schema/?format=json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status in ("400", "401", "403", "404", "429", "503"):
                assert status in operation["responses"], (method, path, status)


@pytest.mark.parametrize("query", ["status=", "status=succeeded&status=failed", "agent="])
def test_filters_it_cannot_apply_are_refused(compliance, query):
    response = compliance.get(f"/api/v1/runs/?{query}")
    assert response.status_code == 400, response.content


def test_a_boolean_filter_takes_true_or_false_only(admin):
    assert admin.get("/api/v1/tools/?enabled=null").status_code == 400
    assert admin.get("/api/v1/tools/?enabled=false").json()["count"] == 0


@pytest.mark.parametrize("query", ["", "?format=", "?format=xml", "?format=csv&format=jsonl"])
def test_the_export_needs_one_known_format(compliance, query):
    response = compliance.get(f"/api/v1/receipts/export/{query}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "format" in response.json()["error"]["details"]


def test_a_form_encoded_body_is_refused_as_unsupported(operator):
    response = operator.post("/api/v1/runs/", "agent=crm-assistant&input=hi",
                             content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"
    assert Run.objects.count() == 0


def test_an_empty_export_still_says_what_it_is(compliance):
    response = compliance.get("/api/v1/receipts/export/?format=jsonl")
    assert response.status_code == 200 and response.content == b""
    assert response["Content-Type"] == "application/x-ndjson"


@pytest.mark.parametrize("body", [{"agent": "crm-assistant", "input": 4.5},
                                  {"agent": 12, "input": "List all accounts."}])
def test_a_number_is_not_text(operator, body):
    response = operator.post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["details"]) == [next(k for k, v in body.items() if not isinstance(v, str))]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("text", [" ", "\u000b", "\n\t ", "\x85", "\x1c"])
def test_text_of_only_spaces_is_refused_and_the_schema_says_so(operator, text):
    response = operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": text}, format="json")
    assert response.status_code == 400 and "input" in response.json()["error"]["details"]
    schema = operator.get("/api/v1/schema/?format=json").json()
    assert schema["components"]["schemas"]["RunStartInputRequest"]["properties"]["input"]["pattern"] == SOMETHING_BUT_SPACES


def test_query_filters_document_that_they_need_a_value(compliance):
    schema = compliance.get("/api/v1/schema/?format=json").json()
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/runs/"]["get"]["parameters"]}
    assert parameters["agent"]["minLength"] == 1 and parameters["caller"]["minLength"] == 1


@pytest.mark.parametrize("value", [0, "false", 1])
def test_a_boolean_is_true_or_false_not_a_lookalike(admin, value):
    response = admin.patch("/api/v1/tools/calculator/", {"enabled": value}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"enabled"}


@override_settings(CELERY_TASK_ALWAYS_EAGER=False)
def test_a_queued_run_is_answered_as_it_reads_back(operator):
    """With a broker the run is answered from the row just written, not read again: the same answer."""
    posted = operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "How is Acme doing?"})
    assert posted.status_code == 201 and posted.json()["status"] == "queued"
    assert operator.get(f"/api/v1/runs/{posted.json()['id']}/").json() == posted.json()
