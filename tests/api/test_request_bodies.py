"""Request bodies that cannot be used are refused with a 400 and the error body, never a 500:
unparsable JSON, and JSON nested past the parser's bound (1,000 nested arrays used to raise
RecursionError)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core.parsers import MAX_DEPTH, depth_problem, loads_bounded

pytestmark = pytest.mark.django_db


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("body", [
    '{"agent": "crm-assistant", "input": ' + _deep(1000) + "}",
    _deep(1000),
    '{"a":' * 5000 + "1" + "}" * 5000,
    _deep(MAX_DEPTH + 1),
    '{"agent": "crm-assistant", "input": "x"',  # cut short
    '{"agent": NaN}',
])
@pytest.mark.parametrize("persona, path", [
    ("operator", "/api/v1/runs/"), ("admin", "/api/v1/policies/"), ("admin", "/api/v1/tool-sources/"),
    ("approver", "/api/v1/approvals/00000000-0000-0000-0000-000000000000/approve/"),
])
def test_a_body_that_cannot_be_read_is_a_400_with_the_error_body(request, persona, path, body):
    answer = request.getfixturevalue(persona).generic("POST", path, body, content_type="application/json")
    assert answer.status_code == 400, answer.content[:300]
    assert answer.json()["error"]["code"] == "parse_error"


def test_nesting_up_to_the_bound_is_read(admin):
    # A tool source's OpenAPI document may nest; well inside the bound is fine.
    answer = admin.generic("POST", "/api/v1/policies/evaluate/",
                           '{"input": "How is Acme?", "agent": "crm-assistant"}', content_type="application/json")
    assert answer.status_code == 200
    assert depth_problem(loads_bounded(_deep(MAX_DEPTH))) is None


def test_the_workbench_refuses_deep_json_in_a_form_field_next_to_the_field(demo):
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    answer = client.post("/admin/governance/policy/add/", {
        "name": "deep", "type": "playbook", "priority": 100, "match_mode": "any", "enabled": "on",
        "keywords": _deep(1000), "content": "1. Call `list_accounts`."})
    assert answer.status_code == 200  # the form again, with the error, not a 500
    assert "JSON list of strings" in answer.content.decode()


@pytest.mark.parametrize("admin_url, fields", [
    ("/admin/agents/toolsource/add/", {"name": "deep", "kind": "openapi", "timeout_seconds": 30, "enabled": "on",
                                       "document": _deep(1000), "command": "[]", "env_passthrough": "[]"}),
])
def test_every_admin_json_field_refuses_deep_json(demo, admin_url, fields):
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    answer = client.post(admin_url, fields)
    assert answer.status_code == 200, answer.content[:300]
    assert "Enter a valid JSON." in answer.content.decode()
