"""Python functions as tools: dotted paths, schemas from type hints, enforced deadlines."""

import threading

import jsonschema
import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from agents import sources
from agents.models import Tool
from agents.tools import pytools
from agents.tools.deadline import ToolTimeout, deadline
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext
from governance.services import grant_create
from tests.factories import carry
from tests import factories
from tests.tools import pyfuncs
from tests.runs.helpers import run_script
from tests.tools.conftest import shown, tool_events

pytestmark = pytest.mark.django_db

CTX = ToolContext(run_id="r-1", caller="operator")


def _spec(name: str) -> dict:
    tool = Tool.objects.get(name=name)
    return tool.spec() | {"handler": tool.handler, "timeout_seconds": tool.timeout_seconds}


def _enable(name: str, **fields) -> Tool:
    Tool.objects.filter(name=name).update(enabled=True, **fields)
    tool = Tool.objects.get(name=name)
    grant_create(role=factories.role(factories.CALLER_ROLE), tool=tool)
    return tool


def test_the_schema_comes_from_the_type_hints():
    add = pytools.describe("tests.tools.pyfuncs.add", pyfuncs.add)
    assert add.description == "Add two integers."
    assert add.input_schema == {"type": "object", "additionalProperties": False, "required": ["a"],
                                "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}}}
    greet = pytools.describe("tests.tools.pyfuncs.greet", pyfuncs.greet)
    assert greet.input_schema["properties"] == {
        "name": {"type": "string", "description": "who to greet"},
        "tone": {"enum": ["warm", "dry"], "default": "warm"},
    }  # the ToolContext parameter is not an argument
    jsonschema.Draft202012Validator.check_schema(greet.input_schema)


def test_a_function_without_hints_is_refused_with_the_reason():
    def loose(x, y: int):
        return x

    with pytest.raises(pytools.SignatureError, match="'x' has no type hint"):
        pytools.describe("somewhere.loose", loose)
    with pytest.raises(pytools.SignatureError, match="cannot import"):
        pytools.functions_at("tests.tools.no_such_module")


def test_the_management_command_registers_a_module_disabled_and_ungranted(db, capsys):
    call_command("register_python_tools", "py", "tests.tools.pyfuncs", "--timeout", "3")
    out = capsys.readouterr().out
    assert "created   py__add" in out and "disabled and granted to no role" in out
    tools = Tool.objects.filter(tool_source__name="py")
    assert sorted(t.name for t in tools) == ["py__add", "py__fetch_note", "py__greet", "py__nap"]
    assert not any(t.enabled or t.grants.exists() for t in tools)
    assert Tool.objects.get(name="py__add").timeout_seconds == 3
    call_command("register_python_tools", "py", "tests.tools.pyfuncs")
    assert "unchanged py__add" in capsys.readouterr().out
    with pytest.raises(CommandError, match="cannot import"):
        call_command("register_python_tools", "broken", "tests.tools.nothing_here")


def test_a_python_tool_is_called_with_keywords_and_receives_its_context(db):
    call_command("register_python_tools", "py", "tests.tools.pyfuncs")
    _enable("py__greet")
    assert dispatch(tool=_spec("py__greet"), arguments={"name": "Ada"}, ctx=CTX) == {
        "ok": True, "data": {"greeting": "hello Ada!", "caller": "operator"}}
    refused = dispatch(tool=_spec("py__greet"), arguments={"name": "Ada", "tone": "loud"}, ctx=CTX)
    assert refused["code"] == "invalid_arguments"
    unknown = dispatch(tool=_spec("py__greet"), arguments={"name": "Ada", "shell": "rm -rf /"}, ctx=CTX)
    assert unknown["code"] == "invalid_arguments"


def test_a_hung_python_tool_is_stopped_at_its_deadline(db):
    call_command("register_python_tools", "py", "tests.tools.pyfuncs")
    _enable("py__nap", timeout_seconds=0.5)
    pyfuncs.SLEEPING.clear()
    threads = threading.active_count()
    envelope = dispatch(tool=_spec("py__nap"), arguments={"seconds": 60}, ctx=CTX)
    assert (envelope["ok"], envelope["code"]) == (False, "timeout")
    # It was interrupted inside the loop (its `except Exception` could not swallow the deadline),
    # never finished, and left no thread behind.
    assert pyfuncs.SLEEPING == [True]
    assert threading.active_count() == threads


def test_a_hung_python_tool_is_stopped_off_the_main_thread_too():
    # No signals off the main thread (e.g. under a threaded dev server): the watchdog path.
    pyfuncs.SLEEPING.clear()
    outcome = []

    def call():
        try:
            with deadline(0.5):
                pyfuncs.nap(60)
            outcome.append("finished")
        except ToolTimeout:
            outcome.append("stopped")

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert outcome == ["stopped"] and pyfuncs.SLEEPING == [True]


def test_a_python_tool_goes_through_the_same_gate_in_a_run(replay_agent):
    call_command("register_python_tools", "py", "tests.tools.pyfuncs")
    Tool.objects.filter(name="py__add").update(enabled=True)
    carry(replay_agent, Tool.objects.get(name="py__add"))
    script = {"turns": [[{"name": "py__add", "arguments": {"a": 40}}]]}
    run = run_script(script)
    assert "py__add" not in shown(run) and tool_events(run)[0]["result"]["code"] == "not_permitted"
    grant_create(role=Group.objects.get(name="operators"), tool=Tool.objects.get(name="py__add"))
    run = run_script(script)
    assert tool_events(run)[0]["result"] == {"ok": True, "data": 42}


def test_a_changed_signature_is_held_until_re_approved(db):
    source = sources.tool_source_create(values={"name": "py", "kind": "python", "path": "tests.tools.pyfuncs.add"})
    sources.tool_source_sync(source=source)
    _enable("py__add")
    tool = Tool.objects.get(name="py__add")
    tool.approved_sha256 = "0" * 64  # what was approved is not what the function declares now
    tool.save()
    assert sources.tool_source_sync(source=source)["changed"] == ["py__add"]
    assert dispatch(tool=_spec("py__add"), arguments={"a": 1}, ctx=CTX)["code"] == "tool_held"
    sources.tool_change_approve(tool=tool)
    assert dispatch(tool=_spec("py__add"), arguments={"a": 1}, ctx=CTX) == {"ok": True, "data": 3}


def test_a_function_gone_from_its_module_is_held_as_removed(db):
    source = sources.tool_source_create(values={"name": "py", "kind": "python", "path": "tests.tools.pyfuncs"})
    sources.tool_source_sync(source=source)
    sources.tool_source_update(source=source, values={"path": "tests.tools.pyfuncs.add"})
    report = sources.tool_source_sync(source=source)
    assert report["removed"] == ["py__fetch_note", "py__greet", "py__nap"] and report["unchanged"] == ["py__add"]
    greet = Tool.objects.get(name="py__greet")
    assert greet.held and greet.pending_change["removed"] is True
    assert "no longer offered" in sources.tool_change_diff(greet)
    with pytest.raises(sources.Conflict, match="no longer exists"):
        sources.tool_change_approve(tool=greet)


def test_a_deployment_may_restrict_which_programs_stdio_sources_start(db, settings):
    settings.WARRANT = settings.WARRANT | {"MCP_STDIO_COMMANDS": ["mcp-server-time"]}
    with pytest.raises(sources.ValidationError, match="not among the programs"):
        sources.tool_source_create(values={"name": "sh", "kind": "mcp_stdio", "command": ["/bin/sh", "-c", "id"]})
    assert sources.tool_source_create(values={"name": "clock", "kind": "mcp_stdio", "command": ["mcp-server-time"]})


def test_a_deployment_may_restrict_which_modules_python_sources_import(db, settings):
    settings.WARRANT = settings.WARRANT | {"PYTHON_TOOL_MODULES": ["tests.tools"]}
    with pytest.raises(sources.ValidationError, match="outside the modules"):
        sources.tool_source_create(values={"name": "os", "kind": "python", "path": "os.path"})
    with pytest.raises(sources.ValidationError, match="outside the modules"):
        sources.tool_source_create(values={"name": "sly", "kind": "python", "path": "tests.toolsmith"})
    assert sources.tool_source_create(values={"name": "py", "kind": "python", "path": "tests.tools.pyfuncs"})
