"""What a sync reports and records when the source cannot be used, and that it is all or nothing."""

import pytest

from agents import sources
from agents.models import Tool, ToolSource

pytestmark = pytest.mark.django_db


def _tools(source_name: str) -> dict:
    return {t.name: (t.description, t.input_schema, t.held, t.pending_change, t.enabled)
            for t in Tool.objects.filter(tool_source__name=source_name)}


def _document(*operation_ids: str) -> dict:
    return {"openapi": "3.0.3", "servers": [{"url": "http://127.0.0.1:1/"}],
            "paths": {f"/op{i}": {"get": {"operationId": op, "summary": f"operation {op}"}}
                      for i, op in enumerate(operation_ids)}}


def test_a_module_that_cannot_be_imported_any_more_leaves_its_tools_untouched(governance_admin):
    assert governance_admin.api.post("/api/v1/tool-sources/", {"name": "py", "kind": "python", "path": "tests.tools.pyfuncs"},
                      format="json").status_code == 201
    assert governance_admin.api.post("/api/v1/tool-sources/py/sync/", format="json").json()["ok"] is True
    before = _tools("py")
    assert governance_admin.api.patch("/api/v1/tool-sources/py/", {"path": "tests.tools.nothing_here"}, format="json").status_code == 200

    response = governance_admin.api.post("/api/v1/tool-sources/py/sync/", format="json")
    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is False and report["error"]["code"] == "source_invalid"
    assert "cannot import tests.tools.nothing_here" in report["error"]["message"]
    assert _tools("py") == before  # nothing held as removed
    source = ToolSource.objects.get(name="py")
    assert (source.last_sync_ok, source.last_sync_error_code) == (False, "source_invalid")
    assert source.last_sync_error == report["error"]["message"]

    governance_admin.api.patch("/api/v1/tool-sources/py/", {"path": "tests.tools.pyfuncs"}, format="json")
    report = governance_admin.api.post("/api/v1/tool-sources/py/sync/", format="json").json()
    assert report["ok"] is True and report["error"] is None and len(report["unchanged"]) == 4
    shown = governance_admin.api.get("/api/v1/tool-sources/py/").json()
    assert (shown["last_sync_ok"], shown["last_sync_error_code"], shown["last_sync_error"]) == (True, "", "")


def test_two_tools_that_would_share_one_name_fail_the_sync(db):
    # Tool names are cut at 64 characters: with a 32-character source name, two operations that
    # differ only after their 30th character would become one tool. Neither may replace the other.
    name = "s" * 32
    source = sources.tool_source_create(values={"name": name, "kind": "openapi",
                                                "document": _document("x" * 30 + "_one", "x" * 30 + "_two")})
    report = sources.tool_source_sync(source=source)
    assert report["ok"] is False and report["error"]["code"] == "source_invalid"
    assert f"{name}__{'x' * 30}" in report["error"]["message"]
    assert not Tool.objects.filter(tool_source=source).exists()
    source.refresh_from_db()
    assert source.last_sync_ok is False and source.last_synced_at == report["synced_at"]


def test_a_document_not_shaped_as_openapi_fails_the_sync_instead_of_crashing_it(governance_admin):
    for number, document in enumerate([
        {"openapi": "3.0.0", "paths": {"/x": 5}},
        {"openapi": "3.0.0", "paths": {"/x": {"get": {"parameters": [{}]}}}},
        {"openapi": "3.0.0", "paths": {"/x": {"get": {"operationId": 5}}}},
        {"openapi": "3.0.0", "servers": [5], "paths": {}},
    ]):
        name = f"doc{number}"
        assert governance_admin.api.post("/api/v1/tool-sources/", {"name": name, "kind": "openapi", "document": document},
                          format="json").status_code == 201
        response = governance_admin.api.post(f"/api/v1/tool-sources/{name}/sync/", format="json")
        assert response.status_code == 200, document
        assert response.json()["ok"] is False and response.json()["error"]["code"] == "source_invalid", document


def test_a_url_the_http_client_cannot_use_fails_the_sync(db):
    source = sources.tool_source_create(values={"name": "svc", "kind": "openapi", "url": "http://a..b/openapi.json"})
    report = sources.tool_source_sync(source=source)
    assert report["ok"] is False and report["error"]["code"] == "source_invalid"
    assert "cannot fetch http://a..b/openapi.json" in report["error"]["message"]


def test_a_document_path_that_is_not_a_regular_file_is_not_read(db):
    # /dev/zero would never end and a FIFO would block the worker: only regular files are documents.
    source = sources.tool_source_create(values={"name": "svc", "kind": "openapi", "path": "/dev/null"})
    report = sources.tool_source_sync(source=source)
    assert report["ok"] is False and "not a regular file" in report["error"]["message"]


def test_a_tool_name_taken_outside_the_source_refuses_the_whole_sync(governance_admin):
    # pyfuncs offers add, greet, nap, fetch_note in that order: add and greet would be created first.
    Tool.objects.create(name="py__nap", description="someone else's", input_schema={"type": "object"})
    assert governance_admin.api.post("/api/v1/tool-sources/", {"name": "py", "kind": "python", "path": "tests.tools.pyfuncs"},
                      format="json").status_code == 201
    response = governance_admin.api.post("/api/v1/tool-sources/py/sync/", format="json")
    assert response.status_code == 409 and "py__nap" in response.json()["error"]["message"]
    assert not Tool.objects.filter(tool_source__name="py").exists()  # add and greet rolled back with it
    source = ToolSource.objects.get(name="py")
    assert (source.last_sync_ok, source.last_sync_error_code) == (False, "tool_name_taken")
    assert Tool.objects.get(name="py__nap").description == "someone else's"


def test_a_python_path_inside_the_allowed_modules_but_naming_no_tool_function_fails_the_sync(db, settings):
    # What a fuzzer reaches under WARRANT_PYTHON_TOOL_MODULES: a module's attributes, dunders included.
    settings.WARRANT = settings.WARRANT | {"PYTHON_TOOL_MODULES": ["tests.tools.pyfuncs"]}
    for number, path in enumerate(["tests.tools.pyfuncs.__class__", "tests.tools.pyfuncs.Literal",
                                   "tests.tools.pyfuncs.SLEEPING", "tests.tools.pyfuncs.time"]):
        source = sources.tool_source_create(values={"name": f"py{number}", "kind": "python", "path": path})
        report = sources.tool_source_sync(source=source)
        assert report["ok"] is False and report["error"]["code"] == "source_invalid", path
        assert not Tool.objects.filter(tool_source=source).exists()


def test_a_file_that_is_not_a_document_is_not_quoted_back(db, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("password: hunter2\nsecret: [unclosed: x\n")
    source = sources.tool_source_create(values={"name": "svc", "kind": "openapi", "path": str(secret)})
    report = sources.tool_source_sync(source=source)
    assert report["ok"] is False and report["error"]["code"] == "source_invalid"
    assert "neither JSON nor YAML" in report["error"]["message"] and " at line " in report["error"]["message"]
    assert "hunter2" not in report["error"]["message"] and "unclosed" not in report["error"]["message"]
