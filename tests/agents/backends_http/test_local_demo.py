"""The demo on a local model in one step, and a fallback said out loud.

WARRANT_MODEL_URL and WARRANT_MODEL_NAME make load_demo put the demo agent on an OpenAI-compatible
server (here a real one on loopback, this helper's ports 7150-7159, with the scripted model behind
its wire format); a run that a fallback answered says so in its API answer and in the workbench's
run and receipt lists, not only in its trace.
"""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import Agent, ModelProfile
from runs.demo import demo_load
from tests.agents.backends_http.flows import ask
from tests.agents.backends_http.server import ModelServer
from tests.agents.backends_http.wire import scripted_openai

pytestmark = pytest.mark.django_db

ENV = ("WARRANT_MODEL_URL", "WARRANT_MODEL_NAME", "WARRANT_MODEL_API_KEY_ENV", "WARRANT_MODEL_BACKEND")


@pytest.fixture
def env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("WARRANT_TEST_MODEL_PORTS", "7150-7159")
    model_server = ModelServer()
    model_server.default = scripted_openai
    yield model_server
    model_server.close()


def _local(env, url: str, **more) -> None:
    env.setenv("WARRANT_MODEL_URL", url)
    env.setenv("WARRANT_MODEL_NAME", "llama3.1")
    for name, value in more.items():
        env.setenv(name, value)


def _agent_profile() -> ModelProfile:
    agent = Agent.objects.get(slug="crm-assistant")
    assert agent.current_version.spec["model_profile"]["name"] == agent.model_profile.name  # published, too
    return agent.model_profile


def test_the_pair_puts_the_demo_agent_on_the_server_and_the_run_says_who_answered(env, server, demo, operator):
    _local(env, server.url + "/v1")  # as Ollama's docs write it
    call_command("load_demo", stdout=open("/dev/null", "w"))
    profile = _agent_profile()
    assert (profile.name, profile.backend, profile.base_url, profile.model, profile.fallbacks) == (
        "local-model", "openai", server.url + "/v1", "llama3.1", ["scripted"])
    run = ask("How healthy is Acme Corp?")
    assert run.status == "succeeded", run.error_message
    assert {(seen.path, seen.json["model"]) for seen in server.requests} == {("/v1/chat/completions", "llama3.1")}
    body = operator.get(f"/api/v1/runs/{run.id}/").json()
    assert body["model_profile"] == "local-model"
    assert body["answered_by"] == {"profile": "local-model", "backend": "openai", "model": "served-model"}
    assert (body["fell_back"], body["fallback_calls"]) == (False, 0)


def test_a_server_that_is_down_is_answered_by_scripted_and_the_run_says_it_fell_back(env, server, demo, operator,
                                                                                   compliance, fast_retries):
    url = server.url
    server.close()  # nothing listens there now: every connection is refused
    _local(env, url)
    demo_load()
    run = ask("List all accounts.")
    assert run.status == "succeeded", run.error_message
    body = operator.get(f"/api/v1/runs/{run.id}/").json()
    assert body["model_profile"] == "local-model"
    assert body["answered_by"] == {"profile": "scripted", "backend": "scripted", "model": "scripted-1"}
    assert body["fell_back"] is True and body["fallback_calls"] == run.llm_calls >= 1
    listed = next(r for r in operator.get("/api/v1/runs/").json()["results"] if r["id"] == str(run.id))
    assert listed["fell_back"] is True
    # The workbench's lists: compliance reads every run and receipt there.
    browser = _browser("compliance")
    label = f"FELL BACK to scripted ({run.llm_calls} call{'s' if run.llm_calls != 1 else ''}; asked local-model)"
    assert label in browser.get("/admin/runs/run/").content.decode()
    assert label in browser.get("/admin/runs/receipt/").content.decode()


def test_a_run_the_requested_profile_answered_is_not_marked_in_the_lists(env, demo):
    run = ask("List all accounts.")
    assert run.status == "succeeded"
    page = _browser("compliance").get("/admin/runs/run/").content.decode()
    assert "FELL BACK" not in page
    assert "Answered by" in page and "<td class=\"field-answered_by\">scripted</td>" in page


def test_without_the_pair_the_demo_agent_goes_back_to_scripted_and_an_admins_choice_is_kept(env, server, demo):
    _local(env, server.url)
    demo_load()
    assert _agent_profile().name == "local-model"
    env.delenv("WARRANT_MODEL_URL")
    env.delenv("WARRANT_MODEL_NAME")
    result = demo_load()
    assert _agent_profile().name == "scripted" and result["model"].startswith("model: scripted")
    # A profile an admin chose is theirs: load_demo does not move the agent off it.
    mine = ModelProfile.objects.create(name="admins-choice", backend="scripted", model="scripted-1")
    Agent.objects.filter(slug="crm-assistant").update(model_profile=mine)
    _local(env, server.url)
    demo_load()
    assert Agent.objects.get(slug="crm-assistant").model_profile.name == "admins-choice"


def test_a_key_variable_the_deployment_allows_is_sent_as_the_bearer(env, server, demo):
    _local(env, server.url, WARRANT_MODEL_API_KEY_ENV="TEST_LOCAL_MODEL_KEY", TEST_LOCAL_MODEL_KEY="sk-local-42")
    demo_load()
    assert _agent_profile().api_key_env == "TEST_LOCAL_MODEL_KEY"
    assert ask("List all accounts.").status == "succeeded"
    assert server.requests[0].headers["authorization"] == "Bearer sk-local-42"


@pytest.mark.parametrize("values, words", [
    ({"WARRANT_MODEL_URL": "http://127.0.0.1:7150"}, "set both WARRANT_MODEL_URL and WARRANT_MODEL_NAME"),
    ({"WARRANT_MODEL_URL": "ftp://127.0.0.1:7150", "WARRANT_MODEL_NAME": "m"}, "base_url"),
    ({"WARRANT_MODEL_URL": "http://127.0.0.1:7150", "WARRANT_MODEL_NAME": "m",
      "WARRANT_MODEL_API_KEY_ENV": "DJANGO_SECRET_KEY"}, "api_key_env"),
    ({"WARRANT_MODEL_URL": "http://127.0.0.1:7150", "WARRANT_MODEL_NAME": "m", "WARRANT_MODEL_BACKEND": "scripted"},
     "WARRANT_MODEL_BACKEND must be one of anthropic, openai"),
])
def test_a_pair_that_cannot_work_stops_load_demo_saying_why(env, demo, values, words):
    for name, value in values.items():
        env.setenv(name, value)
    with pytest.raises(CommandError, match=words):
        call_command("load_demo", stdout=open("/dev/null", "w"))
    assert _agent_profile().name == "scripted" and not ModelProfile.objects.filter(name="local-model").exists()


def test_a_private_address_is_refused_unless_the_deployment_allows_it(env, demo, settings):
    settings.WARRANT = settings.WARRANT | {"EGRESS_PRIVATE_NETWORKS": []}
    _local(env, "http://127.0.0.1:7150/v1")
    with pytest.raises(CommandError, match="WARRANT_EGRESS_PRIVATE_NETWORKS"):
        demo_load()


def _browser(username: str):
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client
