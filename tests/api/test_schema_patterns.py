"""A value is held to the length and pattern the schema states for it, as the client sent it.

DRF trims text before it checks it; the schema (and every client or fuzzer reading it) speaks of
the text as sent. A CI fuzz run found a role name the schema refuses that the API created.
"""

import re

import pytest
from django.contrib.auth.models import Group

from warrant.schema import SOMETHING_BUT_SPACES
from runs.models import Run

pytestmark = pytest.mark.django_db


def _request_patterns(node, where=""):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield where, node["pattern"]
        for key, value in node.items():
            yield from _request_patterns(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _request_patterns(value, f"{where}/{index}")


def test_every_request_pattern_is_anchored_so_a_whole_match_is_what_the_schema_means(admin):
    schemas = admin.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    patterns = [(f"{name}{where}", pattern) for name, schema in schemas.items() if name.endswith("Request")
                for where, pattern in _request_patterns(schema) if pattern != SOMETHING_BUT_SPACES]
    assert len(patterns) > 10
    # core.api_fields checks these with fullmatch: the same as ECMA-262 only when anchored.
    assert [p for p in patterns if not (p[1].startswith("^") and p[1].endswith("$"))] == []


@pytest.mark.parametrize("name", [" auditors", "auditors ", "auditors\n", "auditors\t", "\x1fauditors", "auditors\x85"])
def test_a_role_name_with_spaces_around_it_is_refused_not_trimmed(admin, name):
    response = admin.post("/api/v1/roles/", {"name": name}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["details"]["name"] == ["Use letters, digits, single spaces and . @ + - _ only."]
    assert not Group.objects.filter(name="auditors").exists()


@pytest.mark.parametrize("name", ["ª", "équipe", "auditors²"])
def test_a_role_name_outside_the_schemas_ascii_letters_is_refused(admin, name):
    """The schema's pattern is read as ECMA-262, whose \\w is ASCII: a fuzz run found "ª" created."""
    response = admin.post("/api/v1/roles/", {"name": name}, format="json")
    assert response.status_code == 400, response.json()
    assert not Group.objects.filter(name=name).exists()


@pytest.mark.parametrize("name", ["", "   "])
def test_a_blank_name_is_called_blank(admin, name):
    response = admin.post("/api/v1/roles/", {"name": name}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["name"] == ["This field may not be blank."]


def test_a_name_one_space_past_the_maximum_length_is_refused(admin):
    response = admin.post("/api/v1/roles/", {"name": "a" * 150 + " "}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["name"] == ["Ensure this field has no more than 150 characters."]
    assert admin.post("/api/v1/roles/", {"name": "a" * 150}, format="json").status_code == 201


def test_a_slug_is_taken_as_sent(operator):
    before = Run.objects.count()
    response = operator.post("/api/v1/runs/", {"agent": "crm-assistant\n", "input": "List all accounts."}, format="json")
    assert response.status_code == 400
    assert re.match(r"Enter a valid .slug.", response.json()["error"]["details"]["agent"][0])
    assert Run.objects.count() == before


def test_list_items_and_blank_values_keep_their_rules(admin):
    response = admin.post("/api/v1/agents/", {"slug": "a-b", "name": "A", "instructions": "x", "model_profile": "scripted",
                                               "tools": ["get_account", "get_account ", 7]}, format="json")
    assert response.status_code == 400
    # Each item by its index, as DRF reports the items it checks itself.
    assert response.json()["error"]["details"]["tools"] == {
        "1": ['Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.'], "2": ["Not a valid string."]}
    # "" is allowed beside the pattern (the schema says so); spaces alone are not "".
    assert admin.patch("/api/v1/model-profiles/scripted/", {"base_url": ""}, format="json").status_code == 200
    response = admin.patch("/api/v1/model-profiles/scripted/", {"base_url": "  "}, format="json")
    assert response.status_code == 400 and "base_url" in response.json()["error"]["details"]
