"""/metrics: refused without its token or an allowed address; figures read from the database."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from agents.models import ModelProfileHealth
from runs.models import ApprovalRequest, Run
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-test-token-7c1d"


def _samples(text: str) -> dict:
    """{(name, frozenset(labels)): value} of every sample."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _scrape(client) -> dict:
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    return _samples(answer.content.decode())


@override_settings(WARRANT_METRICS_TOKEN="", WARRANT_METRICS_ALLOWED_IPS=())
def test_without_a_token_or_an_allow_list_there_is_no_endpoint(client):
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@override_settings(WARRANT_METRICS_TOKEN=TOKEN, WARRANT_METRICS_ALLOWED_IPS=("10.0.0.0/8",))
def test_a_wrong_token_or_an_address_outside_the_list_is_refused(client):
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.1").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", REMOTE_ADDR="192.168.1.1").status_code == 200


@override_settings(WARRANT_METRICS_TOKEN=TOKEN)
def test_the_figures_follow_real_runs(client, operator, approver):
    before = _scrape(client)
    assert _value(before, "warrant_metrics_section_up", section="runs") == 1
    answered = start(operator, "How healthy is Acme Corp?")
    blocked = start(operator, "What is Dana Whitfield's salary?")
    parked = start(operator, "Delete the account Initech.")
    assert (answered["status"], blocked["status"], parked["status"]) == ("succeeded", "blocked", "awaiting_approval")
    agent = "crm-assistant"

    during = _scrape(client)
    assert all(_value(during, "warrant_metrics_section_up", section=s) == 1 for s in
               ("runs", "model_calls", "breakers", "approvals", "receipts", "witness", "queue"))
    assert _value(during, "warrant_runs", agent=agent, status="awaiting_approval") == 1
    assert _value(during, "warrant_runs_finished_total", agent=agent, status="succeeded") == 1
    assert _value(during, "warrant_runs_blocked_total", agent=agent) == 1
    assert _value(during, "warrant_approvals_pending", role="secops") == 1
    assert _value(during, "warrant_receipts_sealed_total") == 2
    steps = _value(during, "warrant_run_steps_total", agent=agent)
    assert steps == sum(Run.objects.values_list("step", flat=True)) and steps > 0
    profile = Run.objects.get(id=answered["id"]).snapshot["agent"]["model_profile"]["name"]
    calls = _value(during, "warrant_model_call_duration_seconds_count", profile=profile, outcome="ok")
    assert calls >= 2  # the answered run's calls and the parked run's first
    assert _value(during, "warrant_model_call_duration_seconds_bucket", profile=profile, outcome="ok", le="+Inf") == calls
    assert _value(during, "warrant_model_breaker_state", profile=profile, state="closed") == 1
    assert _value(during, "warrant_queue_depth") == 0

    approval = ApprovalRequest.objects.get(run_id=parked["id"])
    # As if SecOps took ten minutes: the decision histogram buckets by the time waited.
    ApprovalRequest.objects.filter(id=approval.id).update(created_at=timezone.now() - timedelta(minutes=10))
    assert approver.post(f"/api/v1/approvals/{approval.id}/approve/", {"reason": "ok"}, format="json").status_code == 200
    after = _scrape(client)
    assert _value(after, "warrant_approvals_pending", role="secops") == 0
    assert _value(after, "warrant_runs_finished_total", agent=agent, status="succeeded") == 2
    assert _value(after, "warrant_runs_started_total", agent=agent) == 3  # the blocked one too: blocked in its first step
    decided = dict(role="secops", decision="approved")
    assert _value(after, "warrant_approval_decision_seconds_count", **decided) == 1
    assert _value(after, "warrant_approval_decision_seconds_bucket", **decided, le="300") == 0
    assert _value(after, "warrant_approval_decision_seconds_bucket", **decided, le="900") == 1
    assert 600 <= _value(after, "warrant_approval_decision_seconds_sum", **decided) < 700
    assert _value(after, "warrant_receipts_sealed_total") == 3


@override_settings(WARRANT_METRICS_TOKEN=TOKEN)
def test_an_open_breaker_and_waiting_runs_show(client, operator):
    ModelProfileHealth.objects.create(profile_name="gpu-box", consecutive_failures=5,
                                      opened_until=timezone.now() + timedelta(minutes=5))
    samples = _scrape(client)
    assert _value(samples, "warrant_model_breaker_state", profile="gpu-box", state="open") == 1
    assert _value(samples, "warrant_model_breaker_state", profile="gpu-box", state="closed") == 0
    assert _value(samples, "warrant_model_breaker_consecutive_failures", profile="gpu-box") == 5
    run = Run.objects.get(id=start(operator, "How healthy is Acme Corp?")["id"])
    Run.objects.filter(id=run.id).update(status="queued", status_changed_at=timezone.now() - timedelta(seconds=90))
    samples = _scrape(client)
    assert _value(samples, "warrant_queue_depth") == 1
    assert 90 <= _value(samples, "warrant_queue_oldest_seconds") < 150


@override_settings(WARRANT_METRICS_TOKEN=TOKEN)
def test_a_fallback_and_a_failing_server_are_counted(client, demo, settings):
    from tests.agents.backends_http.flows import ask, use_profile
    from tests.agents.backends_http.server import ModelServer, Reply

    settings.WARRANT = settings.WARRANT | {"MODEL_RETRY_BASE_SECONDS": 0.01, "MODEL_RETRY_MAX_SECONDS": 0.05,
                                           "MODEL_BREAKER_FAILURES": 2}
    server = ModelServer()
    try:
        server.default = lambda seen: Reply(503, {"error": {"message": "no GPU"}})
        use_profile("vllm-gpu", backend="openai", base_url=server.url, max_retries=1, fallbacks=["scripted"])
        run = ask("List all accounts.")
    finally:
        server.close()
    assert run.status == "succeeded"
    samples = _scrape(client)
    calls = _value(samples, "warrant_model_call_duration_seconds_count", profile="vllm-gpu", outcome="ok")
    assert calls >= 1 and _value(samples, "warrant_model_fallbacks_total", profile="vllm-gpu") == calls
    assert _value(samples, "warrant_model_breaker_state", profile="vllm-gpu", state="open") == 1
