"""The admin for tool sources and tools: register, sync, see a held tool's diff, re-approve."""

import pytest
from django.urls import reverse

from agents.models import Tool, ToolSource

pytestmark = pytest.mark.django_db


def test_a_python_source_is_registered_synced_and_its_held_tool_re_approved_in_the_admin(admin_client):
    response = admin_client.post(reverse("admin:agents_toolsource_add"), {
        "name": "py", "kind": "python", "path": "tests.tools.pyfuncs", "command": "[]", "env_passthrough": "[]",
        "document": "null", "timeout_seconds": "5", "enabled": "on",
    })
    assert response.status_code == 302, response.content[:2000]
    source = ToolSource.objects.get(name="py")
    assert source.created_by.username == "admin"

    changelist = reverse("admin:agents_toolsource_changelist")
    response = admin_client.post(changelist, {"action": "sync", "_selected_action": [source.pk]}, follow=True)
    assert "4 created" in response.content.decode()
    tool = Tool.objects.get(name="py__add")
    assert not tool.enabled and tool.timeout_seconds == 5

    tool.held, tool.pending_change = True, {"description": "Add two integers, loudly.", "input_schema": tool.input_schema,
                                            "sha256": "1" * 64, "binding": tool.binding, "handler": tool.handler}
    tool.save()
    page = admin_client.get(reverse("admin:agents_tool_change", args=[tool.pk])).content.decode()
    assert "+description: Add two integers, loudly." in page and "-description: Add two integers." in page

    tools = reverse("admin:agents_tool_changelist")
    admin_client.post(tools, {"action": "approve_change", "_selected_action": [tool.pk]})
    tool.refresh_from_db()
    assert (tool.held, tool.description, tool.approved_sha256) == (False, "Add two integers, loudly.", "1" * 64)
    admin_client.post(tools, {"action": "enable", "_selected_action": [tool.pk]})
    tool.refresh_from_db()
    assert tool.enabled


def test_an_invalid_source_is_not_saved(admin_client):
    response = admin_client.post(reverse("admin:agents_toolsource_add"), {
        "name": "bad", "kind": "mcp_stdio", "command": "[]", "env_passthrough": "[]", "document": "null",
        "timeout_seconds": "5",
    })
    assert response.status_code == 200  # the form again, with the problem on its field
    assert "An mcp_stdio source needs its command" in response.content.decode()
    assert not ToolSource.objects.filter(name="bad").exists()
