"""The demo questions through each HTTP backend, with a loopback server playing the model.

The server reads each wire request as a real server would, lets the scripted model decide, and
answers in the protocol's format; so every turn crosses Warrant's translation both ways.
"""

import pytest

from agents.models import CrmAccount, SentEmail
from runs.models import SideEffect
from tests.agents.backends_http.flows import ask, decide, kinds, receipt_body, use_profile
from tests.agents.backends_http.wire import scripted_anthropic, scripted_openai

pytestmark = pytest.mark.django_db

SERVED = {"openai": ("served-model", scripted_openai), "anthropic": ("served-claude", scripted_anthropic)}


@pytest.fixture(params=["openai", "anthropic"])
def backend(request, model_server, demo):
    name = request.param
    model_server.default = SERVED[name][1]
    use_profile(f"{name}-local", backend=name, base_url=model_server.url)
    return name


def _tools_run(run) -> list[str]:
    return [e["name"] for e in kinds(run, "tool_call") if e["result"]["ok"]]


def test_acme_health_is_scored_through_the_backend_and_the_receipt_says_so(backend, model_server):
    run = ask("How healthy is Acme Corp?")
    assert run.status == "succeeded", run.error_message
    assert "100" in run.output and "healthy" in run.output
    assert _tools_run(run) == ["get_account", "get_usage_trend", "list_open_tickets", "compute_health_score"]
    calls = receipt_body(run)["model_calls"]
    assert len(calls) == len(model_server.requests) == run.llm_calls
    served = SERVED[backend][0]
    assert {(c["requested_model"], c["actual_model"], c["requested_backend"], c["backend"], c["profile"])
            for c in calls} == {("test-model", served, backend, backend, f"{backend}-local")}
    assert all(not e["tokens_estimated"] for e in kinds(run, "model_call"))
    # Counted by the server, and said so: in the receipt and in the run's usage over the API.
    assert {c["tokens_estimated"] for c in calls} == {False}
    from runs.api import RunOutputSerializer

    assert RunOutputSerializer(run).data["usage"]["tokens_estimated"] is False
    assert receipt_body(run)["totals"]["input_tokens"] == sum(c["input_tokens"] for c in calls) > 0
    if backend == "anthropic":
        assert {c["cache_read_tokens"] for c in calls} == {40}
    assert [a["outcome"] for a in kinds(run, "model_attempt")] == ["ok"] * run.llm_calls


def test_churn_risk_ranks_every_account_worst_first(backend):
    run = ask("Which accounts are most at risk of churning?")
    assert run.status == "succeeded", run.error_message
    positions = [run.output.index(name) for name in ("Globex", "Umbrella", "Initech", "Acme")]
    assert positions == sorted(positions), run.output


@pytest.mark.parametrize("text, expected", [
    ("List all accounts.", ["Acme Corp", "Globex", "Initech", "Umbrella"]),
    ("Summarise the open tickets for Globex.", ["T-2", "T-3", "T-4"]),
    ("What is 10% of Acme's ARR?", ["24000"]),
    ("What does our knowledge base say about renewals?", ["[kb-"]),
])
def test_the_other_demo_questions_are_answered(backend, text, expected):
    run = ask(text)
    assert run.status == "succeeded", run.error_message
    assert [fragment in run.output for fragment in expected] == [True] * len(expected), run.output
    if "Globex" in text:
        assert run.output.index("T-2") < run.output.index("T-3")


def test_the_delete_parks_for_secops_then_runs_exactly_once(backend, model_server):
    run = ask("Delete the account Initech.")
    assert run.status == "awaiting_approval"
    assert kinds(run, "approval_requested")[0]["arguments"] == {"account_id": "A-300"}
    assert CrmAccount.objects.filter(account_id="A-300").exists()
    run = decide(run, approve=True)
    assert run.status == "succeeded", run.error_message
    assert not CrmAccount.objects.filter(account_id="A-300").exists()
    assert SideEffect.objects.filter(run=run).count() == 1
    assert receipt_body(run)["approvals"][0]["decision"] == "approved"


def test_the_email_parks_and_a_denial_sends_nothing(backend):
    run = ask("Send an email to dana.whitfield@example.com about the Acme renewal.")
    assert run.status == "awaiting_approval"
    run = decide(run, approve=False)
    assert run.status == "succeeded" and SentEmail.objects.count() == 0


def test_the_salary_question_is_blocked_and_the_server_never_called(backend, model_server):
    run = ask("What is Dana Whitfield's salary?")
    assert run.status == "blocked" and model_server.requests == []
