"""GET /api/v1/dashboard/summary/: who may read it, the period's parameters and their 400s."""

from datetime import UTC, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from review.api import DashboardSummarySerializer
from review.figures import dashboard_figures, default_period
from tests import factories
from tests.runs.helpers import start

URL = "/api/v1/dashboard/summary/"


def _today():
    return timezone.now().astimezone(UTC).date()


@pytest.mark.django_db(transaction=True)
def test_compliance_reads_the_same_figures_as_the_page(operator, compliance):
    start(operator, "How healthy is Acme Corp?")
    start(operator, "What is Dana Whitfield's salary?")
    answer = compliance.get(URL)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body == dashboard_figures(default_period())
    documented = DashboardSummarySerializer(data=body)  # the answer is what the schema says it is
    assert documented.is_valid(), documented.errors
    assert body["runs"]["total"] == 2 and body["runs"]["by_outcome"]["blocked"] == 1
    assert body["period"] == {"from": (_today() - timedelta(days=13)).isoformat(), "to": _today().isoformat(), "days": 14}
    today = _today()
    narrowed = compliance.get(URL, {"created_after": today.isoformat(), "created_before": (today + timedelta(days=1)).isoformat()})
    assert narrowed.json()["period"]["days"] == 1 and narrowed.json()["runs"]["total"] == 2
    earlier = compliance.get(URL, {"created_after": "2020-01-01", "created_before": "2020-02-01"}).json()
    assert earlier["period"] == {"from": "2020-01-01", "to": "2020-01-31", "days": 31} and earlier["runs"]["total"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize("who, status", [
    ("compliance_officer", 200), ("governance_admin", 200), ("superuser", 200),
    ("caller", 403), ("secops", 403), ("nobody", 403),
])
def test_only_compliance_governance_admins_and_superusers_read_it(who, status):
    person = {
        "compliance_officer": factories.compliance_officer, "governance_admin": factories.governance_admin,
        "superuser": lambda: factories.user(superuser=True), "caller": factories.caller, "secops": factories.approver,
        "nobody": factories.user,
    }[who]()
    answer = factories.api_client(person).get(URL)
    assert answer.status_code == status, answer.content
    if status == 403:
        assert answer.json()["error"]["code"] == "permission_denied"
        assert "compliance" in answer.json()["error"]["message"]


@pytest.mark.django_db
def test_anonymous_is_asked_to_authenticate():
    answer = APIClient().get(URL)
    assert answer.status_code in (401, 403) and "error" in answer.json()


@pytest.mark.django_db
@pytest.mark.parametrize("query, field, words", [
    ("created_after=2026-13-01", "created_after", "YYYY-MM-DD"),
    ("created_after=yesterday", "created_after", "YYYY-MM-DD"),
    ("created_before=2026-11-01T00:00:00Z", "created_before", "YYYY-MM-DD"),
    ("created_after=2026-11-10&created_before=2026-11-01", "created_before", "ends before it starts"),
    ("created_after=2026-11-10&created_before=2026-11-10", "created_before", "ends before it starts"),
    ("created_after=2020-01-01&created_before=2026-01-01", "created_before", "at most 366 days"),
    ("created_after=", "created_after", "leave the parameter out"),
    ("created_after=2026-11-01&created_after=2026-11-02", "created_after", "once"),
    ("from=2026-11-01", "from", "Not a parameter"),
    ("created_before=0001-01-01", "created_before", "calendar"),
    ("created_after=9999-12-31", "created_after", "calendar"),
])
def test_a_bad_period_is_a_400_naming_the_parameter(query, field, words):
    answer = factories.api_client(factories.compliance_officer()).get(f"{URL}?{query}")
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "invalid" and error["message"] == "The request is not valid."
    assert list(error["details"]) == [field] and words in error["details"][field][0], error


@pytest.mark.django_db
def test_the_schema_documents_the_operation(admin):
    schema = admin.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/dashboard/summary/"]["get"]
    assert operation["operationId"] == "dashboard_summary"
    assert {p["name"] for p in operation["parameters"]} == {"created_after", "created_before"}
    assert {"200", "400", "403"} <= set(operation["responses"])
    summary = schema["components"]["schemas"]["DashboardSummary"]
    assert set(summary["properties"]) == set(dashboard_figures(default_period()))
