"""OpenAPI services as tool sources, against a real one: Warrant's own API, served live on loopback."""

import socket
import threading

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.test import override_settings
from rest_framework.test import APIClient

from agents import sources
from agents.models import Tool, ToolSource
from agents.tools import openapi
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from governance.services import grant_create
from governance.tokens import token_issue
from runs.models import ApprovalRequest, SideEffect
from tests.agents.trusting import second_governance_admin
from tests.factories import carry
from tests.runs.helpers import advance, run_script
from tests.tools.conftest import shown, tool_events

pytestmark = pytest.mark.django_db(transaction=True)

CTX = ToolContext(run_id="test", caller="operator")
TOKEN_ENV = "TOOLS_TEST_TOKEN"


@pytest.fixture
def warrant_api(live_server, demo, monkeypatch) -> ToolSource:
    """Warrant's own API as an OpenAPI source, its credential (an admin token) in an environment variable."""
    _, key = token_issue(user=User.objects.get(username="admin"), via="command", issued_by="test")
    monkeypatch.setenv(TOKEN_ENV, f"Token {key}")
    source = sources.tool_source_create(values={
        "name": "warrant", "kind": "openapi", "url": f"{live_server.url}/api/v1/schema/",
        "auth_header": "Authorization", "auth_env": TOKEN_ENV, "timeout_seconds": 20,
    })
    sources.tool_source_sync(source=source)
    source.refresh_from_db()
    return source


def _spec(tool: Tool) -> dict:
    tool.refresh_from_db()
    return tool.spec() | {"handler": tool.handler, "timeout_seconds": tool.timeout_seconds}


def _enable_and_grant(name: str) -> Tool:
    tool = Tool.objects.get(name=name)
    tool.enabled = True
    tool.save()
    grant_create(role=Group.objects.get(name="operators"), tool=tool)
    return tool


def test_each_operation_becomes_a_disabled_tool_reads_plain_and_writes_needing_approval(warrant_api, live_server):
    assert warrant_api.base_url == f"{live_server.url}/"
    tools = {t.remote_name: t for t in Tool.objects.filter(tool_source=warrant_api)}
    assert {"runs_list", "runs_create", "agents_retrieve", "roles_destroy", "tool_sources_sync"} <= set(tools)
    assert not any(t.enabled for t in tools.values())
    read = tools["agents_retrieve"]
    assert (read.side_effect, read.requires_approval, read.approver_role) == (False, False, None)
    assert read.binding == {"method": "GET", "path": "/api/v1/agents/{slug}/",
                            "params": {"slug": {"in": "path", "name": "slug"}}, "body": False}
    assert read.input_schema["required"] == ["slug"] and read.input_schema["additionalProperties"] is False
    for name in ("runs_create", "roles_destroy", "policies_partial_update"):
        write = tools[name]
        assert (write.side_effect, write.requires_approval, write.approver_role.name) == (True, True, "secops"), name
    assert "body" in tools["roles_create"].input_schema["properties"]
    assert tools["roles_create"].input_schema["properties"]["body"]["properties"]["name"]["type"] == "string"


def test_a_read_operation_is_called_with_the_credential_from_the_environment(warrant_api, monkeypatch):
    tool = _enable_and_grant("warrant__agents_retrieve")
    envelope = dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)
    assert envelope["ok"], envelope
    assert envelope["data"]["status"] == 200 and envelope["data"]["body"]["slug"] == "crm-assistant"
    listed = dispatch(tool=_spec(_enable_and_grant("warrant__tools_list")), arguments={"limit": 2}, ctx=CTX)
    assert listed["ok"] and len(listed["data"]["body"]["results"]) == 2
    missing = dispatch(tool=_spec(tool), arguments={"slug": "no-such-agent"}, ctx=CTX)
    assert (missing["ok"], missing["code"]) == (False, "http_404")
    monkeypatch.delenv(TOKEN_ENV)
    unset = dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)
    assert (unset["ok"], unset["code"]) == (False, "tool_unavailable") and TOKEN_ENV in unset["error"]


def test_an_openapi_post_needs_approval_and_then_runs_exactly_once(warrant_api, replay_agent, approver):
    # policies/evaluate is a POST that writes nothing on the server: the runs outbox holds its
    # transaction while a side effect runs, and on SQLite a live server writing to the same
    # database would wait for that lock (see docs/tool-sources.md, "Costs and limits, as built").
    tool = _enable_and_grant("warrant__policies_evaluate")
    carry(replay_agent, tool)
    arguments = {"body": {"agent": "crm-assistant", "input": "Delete the account Initech."}}
    run = run_script({"turns": [[{"name": tool.name, "arguments": arguments}]]})
    assert run.status == "awaiting_approval"
    assert tool_events(run) == [] and not SideEffect.objects.filter(run=run).exists()
    request = ApprovalRequest.objects.get(run=run)
    assert request.approver_role.name == "secops"

    assert approver.post(f"/api/v1/approvals/{request.id}/approve/", {"reason": "ok"}, format="json").status_code == 200
    run = advance(run)
    assert run.status == "succeeded"
    [event] = tool_events(run)
    assert event["result"]["ok"], event
    answer = event["result"]["data"]
    assert answer["status"] == 200
    assert {t["name"]: t["needs_approval"] for t in answer["body"]["tools"]}["delete_account"] is True
    effect = SideEffect.objects.get(run=run)
    assert (effect.status, effect.attempts) == ("done", 1)


def test_two_governance_admins_may_lift_the_approval_of_an_openapi_write(warrant_api, replay_agent, admin):
    tool = _enable_and_grant("warrant__policies_evaluate")
    second = APIClient()
    second.force_authenticate(second_governance_admin())
    response = admin.patch(f"/api/v1/tools/{tool.name}/", {"requires_approval": False}, format="json")
    assert response.status_code == 202 and response.json()["kind"] == "approval"  # proposed: a second admin confirms
    assert second.post(f"/api/v1/trust-proposals/{response.json()['id']}/confirm/").json()["state"] == "confirmed"
    assert Tool.objects.get(pk=tool.pk).requires_approval is False
    # Its description is the source's text: until the source is trusted, it taints the run.
    response = admin.patch("/api/v1/tool-sources/warrant/", {"trusted": True, "trust_reason": "our own API"},
                           format="json")
    assert response.status_code == 202  # proposed: a second governance admin confirms it
    assert second.post(f"/api/v1/trust-proposals/{response.json()['id']}/confirm/").json()["state"] == "confirmed"
    carry(replay_agent, tool)
    arguments = {"body": {"agent": "crm-assistant", "input": "List all accounts."}}
    run = run_script({"turns": [[{"name": tool.name, "arguments": arguments}]]})
    assert run.status == "succeeded" and tool_events(run)[0]["result"]["ok"]


def test_an_ungranted_openapi_tool_is_not_shown_nor_called(warrant_api, replay_agent):
    tool = Tool.objects.get(name="warrant__agents_list")
    tool.enabled = True
    tool.save()
    carry(replay_agent, tool)
    run = run_script({"turns": [[{"name": tool.name, "arguments": {}}]]})
    assert tool.name not in shown(run)
    assert tool_events(run)[0]["result"]["code"] == "not_permitted"


def test_a_document_file_imports_like_the_url(warrant_api, tmp_path, live_server):
    import httpx

    document = httpx.get(f"{live_server.url}/api/v1/schema/",
                         headers={"Authorization": __import__("os").environ[TOKEN_ENV]}).text
    path = tmp_path / "warrant.yaml"
    path.write_text(document)
    source = sources.tool_source_create(values={"name": "fromfile", "kind": "openapi", "path": str(path),
                                                "base_url": live_server.url})
    report = sources.tool_source_sync(source=source)
    assert len(report["created"]) == Tool.objects.filter(tool_source=warrant_api).count()
    assert sources.tool_source_sync(source=source)["created"] == []


@pytest.fixture
def silent_server():
    """A loopback TCP server that accepts connections and never answers: a hung service."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # a free port on loopback
    listener.listen()
    accepted, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_hung_http_service_times_out(demo, silent_server):
    document = {"openapi": "3.0.3", "info": {"title": "hung", "version": "1"}, "paths": {
        "/slow": {"get": {"operationId": "slow", "responses": {"200": {"description": "never"}}}}}}
    source = sources.tool_source_create(values={"name": "hung", "kind": "openapi", "document": document,
                                                "base_url": silent_server, "timeout_seconds": 1})
    sources.tool_source_sync(source=source)
    tool = _enable_and_grant("hung__slow")
    envelope = dispatch(tool=_spec(tool), arguments={}, ctx=CTX)
    assert (envelope["ok"], envelope["code"]) == (False, "timeout")


def test_bad_documents_are_refused_with_the_reason(demo):
    for document, reason in (({"swagger": "2.0", "paths": {}}, "OpenAPI 3"),
                             ({"openapi": "3.1.0", "info": {}}, "no 'paths'"),
                             ({"openapi": "3.0.0", "paths": {"/x": {"get": {"parameters": [
                                 {"$ref": "#/components/parameters/nope"}]}}}}, "points nowhere")):
        source = ToolSource(name="bad", kind="openapi", document=document)
        with pytest.raises(openapi.DocumentError, match=reason):
            openapi.operations(openapi.load_document(source))


def test_the_policy_dry_run_reports_a_tool_level_approval(warrant_api, admin):
    _enable_and_grant("warrant__roles_create")
    _enable_and_grant("warrant__roles_list")
    body = admin.post("/api/v1/policies/evaluate/", {"input": "Make a role."}, format="json").json()
    tools = {t["name"]: t for t in body["tools"]}
    assert tools["warrant__roles_create"]["needs_approval"] is True
    assert tools["warrant__roles_create"]["approval"]["approver_role"] == "secops"
    assert tools["warrant__roles_list"]["needs_approval"] is False


def test_an_operation_with_a_broken_schema_is_left_out_and_reported(demo):
    document = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {
        "/ok": {"get": {"operationId": "fine", "responses": {"200": {"description": "ok"}}}},
        "/bad": {"get": {"operationId": "broken", "parameters": [
            {"name": "n", "in": "query", "schema": {"type": "strng"}}], "responses": {"200": {"description": "ok"}}}},
        "/long": {"post": {"operationId": "chatty", "description": "x" * 9000, "responses": {"200": {"description": "ok"}}}},
    }}
    source = sources.tool_source_create(values={"name": "mixed", "kind": "openapi", "document": document,
                                                "base_url": "http://127.0.0.1:18222"})
    report = sources.tool_source_sync(source=source)
    assert report["created"] == ["mixed__chatty", "mixed__fine"]
    [rejected] = report["rejected"]
    assert rejected["name"] == "broken" and "not valid JSON Schema" in rejected["reason"]
    assert not Tool.objects.filter(name="mixed__broken").exists()
    assert len(Tool.objects.get(name="mixed__chatty").description) == 4000  # an operation's text is capped


def _allowed(*hosts: str):
    return override_settings(WARRANT={**settings.WARRANT, "TOOL_ALLOWED_HOSTS": hosts})


def test_tool_sources_reach_only_the_hosts_the_deployment_allows(warrant_api, admin, live_server):
    tool = _enable_and_grant("warrant__agents_retrieve")
    before = set(Tool.objects.filter(tool_source=warrant_api).values_list("name", "description"))
    with _allowed("tools.internal"):
        # Registering one elsewhere is refused, naming the setting.
        refused = admin.post("/api/v1/tool-sources/", {"name": "elsewhere", "kind": "openapi",
                                                      "url": f"{live_server.url}/api/v1/schema/"}, format="json")
        assert refused.status_code == 400 and "WARRANT_TOOL_ALLOWED_HOSTS" in str(refused.json()["error"]["details"]["url"])
        # One registered before the list narrowed is neither called nor synced.
        envelope = dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)
        assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable") and "WARRANT_TOOL_ALLOWED_HOSTS" in envelope["error"]
        report = sources.tool_source_sync(source=warrant_api)
        assert report["ok"] is False and report["error"]["code"] == "source_not_allowed"
    assert set(Tool.objects.filter(tool_source=warrant_api).values_list("name", "description")) == before
    with _allowed("127.0.0.1"):
        assert dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)["ok"]


def test_an_openapi_call_to_loopback_is_refused_once_loopback_is_no_longer_allowed(warrant_api):
    # Issue 24, finding 9: with empty host lists, sources reached loopback services and reported their answers.
    tool = _enable_and_grant("warrant__agents_retrieve")
    assert dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)["ok"]  # debug: loopback allowed
    with override_settings(WARRANT={**settings.WARRANT, "EGRESS_PRIVATE_NETWORKS": [], "TOOL_ALLOWED_HOSTS": ()}):
        envelope = dispatch(tool=_spec(tool), arguments={"slug": "crm-assistant"}, ctx=CTX)
        assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable") and "loopback" in envelope["error"]
        assert sources.tool_source_sync(source=warrant_api)["error"]["code"] == "source_not_allowed"
