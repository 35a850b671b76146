"""A profile's max_tokens, temperature and extra_body reach the model server's request body; the
backend is one of the registered ones; bad options are refused by the API and the admin (400, why).

Against real HTTP servers on loopback (this helper's ports, 7150-7159), through real runs.
"""

import pytest

from agents.models import ModelProfile
from tests.agents.backends_http.flows import ask, use_profile
from tests.agents.backends_http.server import ModelServer, Reply
from tests.agents.backends_http.wire import scripted_anthropic, scripted_openai

pytestmark = pytest.mark.django_db

OPTIONS = {"max_tokens": 256, "temperature": 0.2,
           "extra_body": {"top_k": 20, "seed": 7, "options": {"num_ctx": 8192, "keep_alive": "5m"}}}


@pytest.fixture
def servers(monkeypatch):
    """Model servers on this helper's ports."""
    monkeypatch.setenv("WARRANT_TEST_MODEL_PORTS", "7150-7159")
    made = []

    def make():
        made.append(ModelServer())
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.mark.parametrize("backend, scripted", [("openai", scripted_openai), ("anthropic", scripted_anthropic)])
def test_every_request_of_a_run_carries_the_profiles_options(servers, demo, backend, scripted):
    server = servers()
    server.default = scripted
    use_profile(f"{backend}-tuned", backend=backend, base_url=server.url, **OPTIONS)
    run = ask("How healthy is Acme Corp?")
    assert run.status == "succeeded", run.error_message
    assert len(server.requests) == run.llm_calls >= 2
    for seen in server.requests:
        body = seen.json
        assert (body["max_tokens"], body["temperature"]) == (256, 0.2)
        assert (body["top_k"], body["seed"], body["options"]) == (20, 7, {"num_ctx": 8192, "keep_alive": "5m"})
        assert body["model"] == "test-model" and body["messages"]  # Warrant's own fields are untouched


def test_a_profile_without_options_sends_4096_tokens_and_no_temperature(servers, demo):
    server = servers()
    server.default = scripted_openai
    use_profile("plain", backend="openai", base_url=server.url)
    assert ask("List all accounts.").status == "succeeded"
    body = server.requests[0].json
    assert body["max_tokens"] == 4096 and "temperature" not in body and "top_k" not in body


def test_a_fallback_sends_its_own_options_not_the_requested_profiles(servers, demo, fast_retries):
    down, backup = servers(), servers()
    down.default = lambda seen: Reply(503, {"error": {"message": "loading"}})
    backup.default = scripted_openai
    ModelProfile.objects.create(name="backup", backend="openai", base_url=backup.url, model="backup-model",
                                max_retries=0, max_tokens=64, temperature=1.5, extra_body={"top_p": 0.9})
    use_profile("primary", backend="openai", base_url=down.url, max_retries=0, fallbacks=["backup"], **OPTIONS)
    run = ask("List all accounts.")
    assert run.status == "succeeded", run.error_message
    assert down.requests[0].json["max_tokens"] == 256 and down.requests[0].json["top_k"] == 20
    sent = backup.requests[0].json
    assert (sent["model"], sent["max_tokens"], sent["temperature"], sent["top_p"]) == ("backup-model", 64, 1.5, 0.9)
    assert "top_k" not in sent and "options" not in sent


def test_a_base_url_ending_in_v1_is_not_given_a_second_one(servers, demo):
    server = servers()
    server.default = scripted_openai  # it asserts the path is /v1/chat/completions
    use_profile("sdk-style", backend="openai", base_url=server.url + "/v1")
    run = ask("List all accounts.")
    assert run.status == "succeeded", run.error_message
    assert {seen.path for seen in server.requests} == {"/v1/chat/completions"}


def test_a_stored_profile_cannot_replace_warrants_own_fields(servers, demo):
    """A row written around the checks (by SQL, say): its reserved keys are dropped when the request is made."""
    server = servers()
    server.default = scripted_openai
    profile = use_profile("sneaky", backend="openai", base_url=server.url)
    ModelProfile.objects.filter(pk=profile.pk).update(extra_body={
        "tools": [{"type": "function", "function": {"name": "wire_money", "parameters": {}}}],
        "model": "other", "stream": True, "max_tokens": 1, "top_k": 3})
    from agents.models import Agent
    from agents.services import agent_publish

    agent_publish(agent=Agent.objects.get(slug="crm-assistant"))
    assert ask("List all accounts.").status == "succeeded"
    body = server.requests[0].json
    assert (body["model"], body["stream"], body["max_tokens"], body["top_k"]) == ("test-model", False, 4096, 3)
    assert "wire_money" not in [t["function"]["name"] for t in body.get("tools", [])]


# --- The API and the admin refuse what would not work, saying why -------------------------------------------

BASE = {"name": "tuned", "backend": "openai", "base_url": "http://127.0.0.1:7150", "model": "llama3.1"}


def _error(response) -> dict:
    return response.json()["error"]["details"]


def test_the_api_stores_and_returns_the_options(admin):
    response = admin.post("/api/v1/model-profiles/", BASE | OPTIONS, format="json")
    assert response.status_code == 201, response.content
    assert {k: response.json()[k] for k in OPTIONS} == OPTIONS
    stored = ModelProfile.objects.get(name="tuned")
    assert (stored.max_tokens, stored.temperature, stored.extra_body) == (256, 0.2, OPTIONS["extra_body"])
    changed = admin.patch("/api/v1/model-profiles/tuned/", {"temperature": None, "extra_body": {}}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["temperature"], changed.json()["extra_body"], changed.json()["max_tokens"]) == (None, {}, 256)


@pytest.mark.parametrize("values, field, words", [
    ({"extra_body": {"tools": []}}, "extra_body", "may not set tools"),
    ({"extra_body": {"messages": [], "stream": True}}, "extra_body", "may not set messages, stream"),
    ({"extra_body": {"mcp_servers": []}}, "extra_body", "provider-side tools"),
    ({"extra_body": {"options": {"api_key": "sk-live-1"}}}, "extra_body", "may not hold a secret (api_key)"),
    ({"extra_body": {"stop": ["x" * 5000]}}, "extra_body", "at most 4096"),
    ({"extra_body": ["top_k"]}, "extra_body", "dictionary"),
    ({"temperature": 2.5}, "temperature", "less than or equal to 2"),
    ({"max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ({"backend": "anthropic", "temperature": 1.5}, "temperature", "anthropic backend takes 0 to 1"),
    ({"backend": "mypackage.Backend"}, "backend", "not a registered model backend: one of anthropic, "),
])
def test_the_api_refuses_options_that_would_not_work_and_says_why(admin, values, field, words):
    response = admin.post("/api/v1/model-profiles/", BASE | values, format="json")
    assert response.status_code == 400, response.content
    details = _error(response)
    assert list(details) == [field]
    assert words.lower() in " ".join(details[field]).lower(), details
    assert not ModelProfile.objects.filter(name="tuned").exists()


def test_the_schema_lists_the_registered_backends_as_the_choices(admin):
    schema = admin.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    assert schema["BackendEnum"]["enum"] == ["anthropic", "obeying", "openai", "replay", "scripted"]
    assert schema["ModelProfileCreateRequest"]["properties"]["backend"]["allOf"] == [{"$ref": "#/components/schemas/BackendEnum"}]


def _admin_form(**values) -> dict:
    return {"name": "tuned", "backend": "openai", "base_url": "http://127.0.0.1:7150", "model": "llama3.1",
            "api_key_env": "", "connect_timeout": "5", "read_timeout": "60", "max_retries": "2", "fallbacks": "[]",
            "max_tokens": "", "temperature": "", "extra_body": "{}"} | values


def test_the_admin_offers_the_registered_backends_and_saves_the_options(admin_client):
    page = admin_client.get("/admin/agents/modelprofile/add/").content.decode()
    for name in ("anthropic", "obeying", "openai", "replay", "scripted"):
        assert f'<option value="{name}"' in page
    for field in ("max_tokens", "temperature", "extra_body"):
        assert f'name="{field}"' in page
    response = admin_client.post("/admin/agents/modelprofile/add/", _admin_form(
        max_tokens="300", temperature="0.7", extra_body='{"options": {"num_ctx": 4096}}'))
    assert response.status_code == 302, response.content.decode()[:3000]
    stored = ModelProfile.objects.get(name="tuned")
    assert (stored.max_tokens, stored.temperature, stored.extra_body) == (300, 0.7, {"options": {"num_ctx": 4096}})


@pytest.mark.parametrize("values, words", [
    ({"extra_body": '{"messages": []}'}, "may not set messages"),
    ({"extra_body": '{"authorization": "Bearer x"}'}, "may not hold a secret"),
    ({"backend": "anthropic", "temperature": "1.2"}, "anthropic backend takes 0 to 1"),
    ({"backend": "agents.backends.openai.OpenAIBackend"}, "Select a valid choice"),
])
def test_the_admin_refuses_what_the_api_refuses(admin_client, values, words):
    response = admin_client.post("/admin/agents/modelprofile/add/", _admin_form(**values))
    assert response.status_code == 200 and words.lower() in response.content.decode().lower()
    assert not ModelProfile.objects.filter(name="tuned").exists()


def test_an_emptied_extra_body_box_in_the_admin_means_no_extra_options(admin_client):
    response = admin_client.post("/admin/agents/modelprofile/add/", _admin_form(extra_body=""))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ModelProfile.objects.get(name="tuned").extra_body == {}
