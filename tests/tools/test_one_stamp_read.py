"""One tool call, one stamp read: the gate's live grant check reads the governance stamp, and the
dispatcher's live row check of the same call may use that reading instead of its own. A change is
still seen by the very next call, which reads the stamp again."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Tool
from agents.tools.dispatcher import dispatch
from core import stamp
from governance.selectors import granted_tool_names
from tests.tools.conftest import CTX

pytestmark = pytest.mark.django_db

STAMP_READ = f"SELECT stamp FROM {stamp.STAMP_TABLE} WHERE id = 1"


@pytest.fixture
def add(add) -> dict:
    assert "py__add" in granted_tool_names(role_names=["operators"])  # both answers kept from here on
    return add


def test_the_grant_check_and_the_dispatch_of_one_call_share_one_stamp_read(add):
    with CaptureQueriesContext(connection) as queries:
        read = stamp.current()
        assert "py__add" in granted_tool_names(role_names=["operators"], stamp=read)
        assert dispatch(tool=add, arguments={"a": 2}, ctx=CTX, stamp=read) == {"ok": True, "data": 4}
    assert [q["sql"] for q in queries] == [STAMP_READ]


def test_the_call_after_a_change_reads_the_stamp_again_and_sees_it(add):
    read = stamp.current()
    Tool.objects.filter(name="py__add").update(enabled=False)
    # The next call reads the stamp the change moved on, and so reads the row again.
    next_read = stamp.current()
    assert next_read != read
    assert "py__add" not in granted_tool_names(role_names=["operators"], stamp=next_read)
    assert dispatch(tool=add, arguments={"a": 1}, ctx=CTX, stamp=next_read)["code"] == "tool_unavailable"
