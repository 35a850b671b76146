"""The checks made at every tool call (the tool's row, its source, the caller's grants) answer
from what a process keeps while the governance stamp holds; any change, made the way an admin, a
service or a bulk query would make it, is seen by the very next call."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Tool, ToolSource
from agents.tools.dispatcher import dispatch
from core import stamp
from governance.models import ToolGrant
from governance.selectors import granted_tool_names
from governance.services import grant_create
from tests.tools.conftest import CTX

pytestmark = pytest.mark.django_db


def test_a_kept_tool_row_costs_one_stamp_read(add):
    with CaptureQueriesContext(connection) as queries:
        assert dispatch(tool=add, arguments={"a": 2}, ctx=CTX) == {"ok": True, "data": 4}
    assert [q["sql"] for q in queries] == [f"SELECT stamp FROM {stamp.STAMP_TABLE} WHERE id = 1"]


def test_a_tool_disabled_by_a_bulk_update_is_refused_at_the_next_call(add):
    Tool.objects.filter(name="py__add").update(enabled=False)  # no signal, no save(): the trigger sees it
    assert dispatch(tool=add, arguments={"a": 1}, ctx=CTX)["code"] == "tool_unavailable"
    Tool.objects.filter(name="py__add").update(enabled=True)
    assert dispatch(tool=add, arguments={"a": 1}, ctx=CTX) == {"ok": True, "data": 3}


def test_a_held_tool_is_refused_at_the_next_call(add):
    Tool.objects.filter(name="py__add").update(held=True)
    assert dispatch(tool=add, arguments={"a": 1}, ctx=CTX)["code"] == "tool_held"


def test_a_source_disabled_by_a_bulk_update_stops_its_tools_at_the_next_call(add):
    ToolSource.objects.filter(name="py").update(enabled=False)
    refused = dispatch(tool=add, arguments={"a": 1}, ctx=CTX)
    assert refused["code"] == "tool_unavailable" and "its source py is disabled" in refused["error"]


def test_a_revoked_grant_is_gone_from_the_next_answer(add):
    assert "py__add" in granted_tool_names(role_names=["operators"])
    with CaptureQueriesContext(connection) as queries:
        assert "py__add" in granted_tool_names(role_names=["operators"])
    assert len(queries) == 1  # kept: the stamp alone
    ToolGrant.objects.filter(tool__name="py__add").delete()  # a queryset delete: no signal either
    assert "py__add" not in granted_tool_names(role_names=["operators"])
    grant_create(role=Group.objects.get(name="operators"), tool=Tool.objects.get(name="py__add"))
    assert "py__add" in granted_tool_names(role_names=["operators"])
    Group.objects.filter(name="operators").update(name="ops")  # a renamed role grants nothing under its old name
    assert "py__add" not in granted_tool_names(role_names=["operators"])
