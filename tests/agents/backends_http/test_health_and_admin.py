"""Readiness shows each profile's health; admins test a profile in one click; profiles are validated."""

import pytest
from django.urls import reverse

from agents.models import ModelProfile, ModelProfileHealth
from tests.agents.backends_http.flows import ask, use_profile
from tests.agents.backends_http.server import Reply
from tests.agents.backends_http.wire import anthropic_reply, openai_reply

pytestmark = pytest.mark.django_db


def _readyz_profile(client, name: str) -> dict:
    body = client.get("/readyz").json()
    return next(p for p in body["models"] if p["name"] == name)


def test_readyz_shows_breaker_last_success_and_last_error_without_urls_or_key_names(client, model_server, demo,
                                                                                   fast_retries):
    use_profile("gpu-box", backend="openai", base_url=model_server.url, api_key_env="GPU_BOX_KEY_NAME",
                max_retries=2, fallbacks=["scripted"])
    assert _readyz_profile(client, "gpu-box") | {"last_success_at": None} == {
        "name": "gpu-box", "backend": "openai", "model": "test-model", "breaker": "closed", "consecutive_failures": 0,
        "last_success_at": None, "last_error_at": None, "last_error": ""}
    model_server.default = lambda seen: Reply(503, {"error": {"message": "down"}})
    ask("List all accounts.")  # the key variable is unset: a config error, no call, no breaker
    assert _readyz_profile(client, "gpu-box")["last_error"] == "the key variable is not set in this process's environment"
    assert "GPU_BOX_KEY_NAME" in ModelProfileHealth.objects.get(profile_name="gpu-box").last_error  # for the admin
    ModelProfile.objects.filter(name="gpu-box").update(api_key_env="")
    from agents.services import agent_publish
    from agents.models import Agent

    agent_publish(agent=Agent.objects.get(slug="crm-assistant"))
    ask("List all accounts.")
    health = _readyz_profile(client, "gpu-box")
    assert health["breaker"] == "open" and health["consecutive_failures"] == 3 and health["last_error"] == "HTTP 503"
    response = client.get("/readyz")
    assert response.status_code == 200 and model_server.url not in response.content.decode()
    assert "GPU_BOX_KEY_NAME" not in response.content.decode() and "down" not in response.content.decode()


@pytest.mark.parametrize("backend, reply", [("openai", openai_reply("ok")), ("anthropic", anthropic_reply("ok"))])
def test_the_admin_tests_a_profile_with_one_click_and_a_success_closes_its_breaker(admin_client, model_server,
                                                                                  backend, reply):
    profile = ModelProfile.objects.create(name="probe-me", backend=backend, base_url=model_server.url,
                                          model="m-1")
    ModelProfileHealth.objects.create(profile_name="probe-me", consecutive_failures=9,
                                      opened_until="2999-01-01T00:00:00Z")
    changelist = admin_client.get(reverse("admin:agents_modelprofile_changelist")).content.decode()
    test_url = reverse("admin:agents_modelprofile_test", args=[profile.pk])
    assert f'formaction="{test_url}"' in changelist and "open" in changelist
    model_server.script(Reply(json=reply))
    response = admin_client.post(test_url, follow=True)
    assert response.status_code == 200
    assert "Probe-me: answered in" in response.content.decode()  # the admin capitalises messages
    assert "Reply with the single word: ok" in str(model_server.requests[0].json["messages"][-1]["content"])
    health = ModelProfileHealth.objects.get(profile_name="probe-me")
    assert health.opened_until is None and health.last_success_at is not None


def test_a_failed_admin_test_says_why(admin_client, model_server):
    profile = ModelProfile.objects.create(name="probe-me", backend="openai", base_url=model_server.url, model="m-1")
    model_server.script(Reply(404, {"error": {"message": "model 'm-1' not found, try pulling it first"}}))
    response = admin_client.post(reverse("admin:agents_modelprofile_test", args=[profile.pk]), follow=True)
    assert "failed: HTTP 404: model &#x27;m-1&#x27; not found" in response.content.decode()
    assert len(model_server.requests) == 1


def test_the_admin_test_refuses_a_get(admin_client):
    profile = ModelProfile.objects.get(name="scripted")
    assert admin_client.get(reverse("admin:agents_modelprofile_test", args=[profile.pk])).status_code == 403


def test_the_api_tests_a_profile(admin, model_server):
    ModelProfile.objects.create(name="probe-api", backend="openai", base_url=model_server.url, model="m-1",
                                read_timeout=0.3)
    model_server.script(Reply(json=openai_reply("ok"), delay=2))
    body = admin.post("/api/v1/model-profiles/probe-api/test/").json()
    assert body["ok"] is False and body["error"] == "waiting for the reply timed out" and body["breaker"] == "closed"
    model_server.script(Reply(json=openai_reply("ok", model="served")))
    body = admin.post("/api/v1/model-profiles/probe-api/test/").json()
    assert (body["ok"], body["model"], body["reply"], body["error"]) == (True, "served", "ok", "")


@pytest.mark.parametrize("values, field", [
    ({"backend": "openai", "base_url": ""}, "base_url"),
    ({"backend": "anthropic", "base_url": ""}, "base_url"),
    ({"backend": "openai", "base_url": "http://127.0.0.1:11434", "read_timeout": 0}, "read_timeout"),
    ({"backend": "openai", "base_url": "http://127.0.0.1:11434", "connect_timeout": 601}, "connect_timeout"),
    ({"backend": "openai", "base_url": "ftp://127.0.0.1"}, "base_url"),
    ({"backend": "no.such.Backend"}, "backend"),
])
def test_profiles_that_cannot_work_are_refused(admin, values, field):
    response = admin.post("/api/v1/model-profiles/", {"name": "bad", "model": "m"} | values, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["details"], response.content


def test_the_admin_form_runs_the_same_checks(admin_client):
    response = admin_client.post(reverse("admin:agents_modelprofile_add"), {
        "name": "no-url", "backend": "openai", "base_url": "", "model": "m", "api_key_env": "",
        "connect_timeout": 5, "read_timeout": 60, "max_retries": 50, "fallbacks": "[]"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "needs the server" in page and "Must be between 0 and 10" in page
    assert not ModelProfile.objects.filter(name="no-url").exists()


def test_the_admin_takes_a_bare_host_and_keeps_a_saved_name_fixed(admin_client):
    response = admin_client.post(reverse("admin:agents_modelprofile_add"), {
        "name": "ollama", "backend": "openai", "base_url": "http://ollama:11434", "model": "llama3.1:8b",
        "api_key_env": "", "connect_timeout": 5, "read_timeout": 60, "max_retries": 1, "fallbacks": "[]"})
    assert response.status_code == 302, response.content.decode()[:2000]
    profile = ModelProfile.objects.get(name="ollama")
    assert profile.base_url == "http://ollama:11434"
    page = admin_client.get(reverse("admin:agents_modelprofile_change", args=[profile.pk])).content.decode()
    assert 'name="name"' not in page  # shown, not editable
    assert admin_client.post(reverse("admin:agents_modelprofile_delete", args=[profile.pk]), {"post": "yes"}).status_code == 403
    assert ModelProfile.objects.filter(name="ollama").exists()
