"""A trusted tool source moved by one governance admin.

Two governance admins marked a source trusted: what it answers from (its program, endpoint,
document, module, credentials) is what they vouched for. One admin alone who then points the
source somewhere else (their own server, another module, another document) would have that
server's answers read untainted under the two admins' mark. So a change of where a trusted source
answers from untrusts it, at once and recorded (a sealed TrustChange saying why); trusting it
again takes two admins, as the first time. A change of anything else keeps the mark.
"""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from agents import sources
from agents.models import ToolSource, TrustChange
from tests.agents.trusting import trust_by_two_admins

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()
DOCUMENT = {"openapi": "3.0.0", "info": {"title": "docs", "version": "1"}, "paths": {}}


def _trusted_source() -> ToolSource:
    source = ToolSource.objects.create(name="docs", kind="openapi", document=DOCUMENT,
                                       base_url="https://docs.example.com")
    trust_by_two_admins(source, reason="our own wiki")
    assert ToolSource.objects.get(pk=source.pk).trusted is True
    return source


def _admin() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.get(username="admin"))
    return client


def _changes():
    return list(TrustChange.objects.filter(name="docs").order_by("seq").values_list("trusted", "changed_by__username"))


@pytest.mark.parametrize("values", [
    {"base_url": "https://elsewhere.example.com"},
    {"document": DOCUMENT | {"servers": [{"url": "https://elsewhere.example.com"}]}},
    {"auth_header": "Authorization", "auth_env": "TEST_DOCS_TOKEN"},
])
def test_one_admin_moving_a_trusted_source_untrusts_it_with_a_sealed_change(demo, values):
    _trusted_source()
    response = _admin().patch("/api/v1/tool-sources/docs/", values, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["trusted"] is False
    assert ToolSource.objects.get(name="docs").trusted is False
    assert _changes() == [(True, "admin"), (False, "admin")]
    change = TrustChange.objects.filter(name="docs").order_by("seq").last()
    assert change.was_trusted is True and set(values) <= set(change.reason.replace(",", " ").split())


def test_the_same_admin_cannot_trust_it_again_alone(demo):
    _trusted_source()
    admin = _admin()
    admin.patch("/api/v1/tool-sources/docs/", {"base_url": "https://elsewhere.example.com"}, format="json")
    again = admin.patch("/api/v1/tool-sources/docs/", {"trusted": True}, format="json")
    assert again.status_code == 202  # a proposal: another governance admin confirms it
    assert ToolSource.objects.get(name="docs").trusted is False


def test_retuning_a_trusted_source_keeps_its_mark(demo):
    _trusted_source()
    response = _admin().patch("/api/v1/tool-sources/docs/", {"timeout_seconds": 7, "description": "the wiki",
                                                             "base_url": "https://docs.example.com"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["trusted"] is True and _changes() == [(True, "admin")]


def test_the_platform_moving_it_untrusts_it_too(demo):
    source = _trusted_source()
    sources.tool_source_update(source=source, values={"base_url": "https://elsewhere.example.com"})
    assert ToolSource.objects.get(name="docs").trusted is False
    assert _changes() == [(True, "admin"), (False, None)]


def test_moving_it_in_the_admin_names_the_admin_who_did(demo):
    _trusted_source()
    browser = Client()
    browser.force_login(User.objects.get(username="admin"))
    source = ToolSource.objects.get(name="docs")
    response = browser.post(f"/admin/agents/toolsource/{source.pk}/change/", {
        "description": source.description, "document": json.dumps(source.document),
        "base_url": "https://elsewhere.example.com", "timeout_seconds": source.timeout_seconds,
        "approver_role": "", "enabled": "on", "trusted": "on", "env_passthrough": "[]",
        "auth_header": "", "auth_env": "", "command": "[]", "url": "", "path": ""})
    assert response.status_code == 302, response.content[:2000]
    assert ToolSource.objects.get(name="docs").trusted is False
    assert _changes() == [(True, "admin"), (False, "admin")]
