"""What one superuser could loosen in the Django admin by deleting (or renaming) a row, alone.

The API deletes no tool, tool source, agent or account, and loosening a tool's approval takes two
governance admins (agents.trust_approval). In the admin a superuser deleted a tool an admin had put
under approval, or its source, and the next sync brought the tool back with the defaults (an MCP tool
needs no approval), to be enabled in one step; a renamed built-in slipped out from under the policies
that name it; an unpublished agent left the scope of the policies naming it, past their gate and
history; and a deleted go-between account took the admin log with it that core.four_eyes
reads, so the account it had made counted as a second admin. None of these rows is deleted there now,
by the page or by the changelist's bulk action, and a saved tool keeps its name.
"""

import json

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from agents.models import Agent, Tool, ToolSource, tool_fingerprint
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from core.four_eyes import SecondAdminRequired, check_second_admin
from tests import factories

pytestmark = pytest.mark.django_db
User = get_user_model()


def _superuser() -> Client:
    client = Client(raise_request_exception=False)  # Django's bulk delete refuses with PermissionDenied
    client.force_login(User.objects.get(username="admin"))  # the demo's superuser, a governance admin
    return client


def _refuses_deleting(client: Client, model: str, obj) -> None:
    """The delete page answers 403 (asked and confirmed), the change page links to none, and the
    changelist offers no bulk delete, nor runs one posted anyway."""
    base = f"/admin/{model}/"
    assert client.get(f"{base}{obj.pk}/delete/").status_code == 403
    assert client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
    change = client.get(f"{base}{obj.pk}/change/")
    assert change.status_code == 200 and f"{obj.pk}/delete/" not in change.content.decode()
    changelist = client.get(base)
    assert changelist.status_code == 200 and "delete_selected" not in changelist.content.decode()
    client.post(base, {"action": "delete_selected", "_selected_action": [obj.pk], "index": 0, "post": "yes"})
    assert type(obj).objects.filter(pk=obj.pk).exists()


def _tightened_discovered_tool() -> Tool:
    """An MCP server's tool that a governance admin put under the secops role's approval (the sync
    would make it with no approval)."""
    source = ToolSource.objects.create(name="desk", kind="mcp_http", url="https://mcp.example.org/mcp")
    said, schema = "Close a ticket.", {"type": "object"}
    return Tool.objects.create(name="desk__close_ticket", description=said, input_schema=schema, side_effect=True,
                               tool_source=source, source="mcp", remote_name="close_ticket", enabled=True,
                               requires_approval=True, approver_role=Group.objects.get(name="secops"),
                               approved_sha256=tool_fingerprint(said, schema))


def test_a_tool_under_approval_is_not_deleted_in_the_admin(demo):
    tool = _tightened_discovered_tool()
    _refuses_deleting(_superuser(), "agents/tool", tool)
    tool.refresh_from_db()
    assert tool.requires_approval and tool.approver_role.name == "secops"


def test_a_tool_source_is_not_deleted_with_its_tools_in_the_admin(demo):
    tool = _tightened_discovered_tool()
    _refuses_deleting(_superuser(), "agents/toolsource", tool.tool_source)
    assert Tool.objects.get(pk=tool.pk).requires_approval


def test_a_built_in_tool_keeps_its_name_in_the_admin(demo):
    """Renamed, send_email would no longer be the tool the secops approval policy names."""
    tool = Tool.objects.get(name="send_email")
    browser = _superuser()
    page = browser.get(f"/admin/agents/tool/{tool.pk}/change/").content.decode()
    assert 'name="name"' not in page  # shown, not editable
    response = browser.post(f"/admin/agents/tool/{tool.pk}/change/", {
        "name": "send_email_quietly", "description": tool.description, "input_schema": json.dumps(tool.input_schema),
        "timeout_seconds": tool.timeout_seconds, "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Tool.objects.filter(pk=tool.pk, name="send_email").exists()
    assert not Tool.objects.filter(name="send_email_quietly").exists()


def test_a_tool_added_in_the_admin_takes_no_tools_name_and_calls_nothing(demo):
    """Confirms what held before: a built-in's name is taken (it is never deleted now, so never free
    to take again), and a tool added in the admin has no handler (read-only on add), so a call of it
    reaches no code, approval or not."""
    browser = _superuser()
    form = {"description": "Send a mail.", "input_schema": '{"type": "object"}', "timeout_seconds": 10,
            "enabled": "on"}
    taken = browser.post("/admin/agents/tool/add/", form | {"name": "send_email", "handler": "agents.tools.crm.send_email"})
    assert taken.status_code == 200 and "already exists" in taken.content.decode()
    assert Tool.objects.filter(name="send_email").count() == 1
    added = browser.post("/admin/agents/tool/add/", form | {"name": "mail_out", "handler": "agents.tools.crm.send_email"})
    assert added.status_code == 302, added.content.decode()[:2000]
    tool = Tool.objects.get(name="mail_out")
    assert (tool.handler, tool.tool_source_id, tool.requires_approval, tool.enabled) == ("", None, False, True)
    envelope = dispatch(tool=tool.spec(), arguments={}, ctx=ToolContext(run_id="r", caller="admin"))
    assert (envelope["ok"], envelope["code"]) == (False, "tool_unavailable")


def test_an_agent_is_not_deleted_out_of_its_policies_in_the_admin(demo):
    """Deleted, the agent left the scope of every policy naming it, unrecorded (no version, no gate): an
    intent guard for it and crm-assistant then names crm-assistant alone, and an agent made again under
    the same slug runs unguarded. (An agent with golden cases was refused already: Django asks for the
    cases' delete permission too, which the workbench gives no one.)"""
    agent = factories.agent(publish=False)
    guard = factories.policy(agents=[agent, Agent.objects.get(slug="crm-assistant")])
    versions = guard.version
    _refuses_deleting(_superuser(), "agents/agent", agent)
    guard.refresh_from_db()
    assert sorted(guard.agents.values_list("slug", flat=True)) == sorted([agent.slug, "crm-assistant"])
    assert guard.version == versions


def test_an_account_is_not_deleted_so_the_accounts_it_made_stay_no_second_admin(demo):
    """The superuser makes a deputy, the deputy makes a governance admin; deleting the deputy would
    erase the deputy's admin log, and with it the only record that the superuser is behind that admin."""
    boss = User.objects.get(username="admin")
    web = _superuser()
    deputy = factories.made_in_admin(web, "deputy")
    User.objects.filter(pk=deputy.pk).update(is_staff=True, is_superuser=True)
    as_deputy = Client()
    as_deputy.force_login(User.objects.get(pk=deputy.pk))
    puppet = factories.made_in_admin(as_deputy, "puppet3")
    puppet.groups.add(Group.objects.get(name=settings.WARRANT["GOVERNANCE_ADMIN_ROLE"]))

    def confirm_as_puppet():
        check_second_admin(puppet, what="marking the desk source trusted", parties=[(boss, "proposed it")])

    with pytest.raises(SecondAdminRequired):
        confirm_as_puppet()
    _refuses_deleting(web, "auth/user", deputy)
    with pytest.raises(SecondAdminRequired):
        confirm_as_puppet()
