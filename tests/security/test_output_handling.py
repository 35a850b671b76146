"""Model output is data too: escaped wherever it is shown, neutralised in CSV, never fetched."""

import csv
import io
import json
from http.server import BaseHTTPRequestHandler

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from runs import services
from runs.models import ApprovalRequest
from runs.receipts_export import neutralise
from tests import loopback
from tests.runs.helpers import run_script
from tests.security.test_approval_binding import EMAIL

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('owned')</script>"


class Hits(list):
    base = ""


@pytest.fixture
def tripwire():
    """A loopback server that counts every request: anything fetching a link from model output trips it."""
    hits = Hits()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    with loopback.serving(Handler) as server:  # a free port on loopback
        hits.base = "http://127.0.0.1:%d" % server.server_address[1]
        yield hits


def _admin() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    return client


def test_model_text_is_escaped_in_the_admin_and_served_as_json_by_the_api(replay_agent, operator):
    run = run_script({"turns": [[{"name": "send_email", "arguments": dict(EMAIL, body=SCRIPT)}]], "final": SCRIPT})
    approval = ApprovalRequest.objects.get(run=run)
    ApprovalRequest.objects.filter(id=approval.id).update(model_rationale=SCRIPT)
    services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"), approve=False,
                             reason="no")
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert SCRIPT in run.output
    for path in (f"/admin/runs/run/{run.id}/change/", f"/admin/runs/approvalrequest/{approval.id}/change/",
                 "/admin/runs/run/", "/admin/runs/runevent/"):
        page = _admin().get(path)
        assert page.status_code == 200, path
        html = page.content.decode()
        assert SCRIPT not in html, f"{path} renders model text as markup"
    assert "&lt;script&gt;" in _admin().get(f"/admin/runs/run/{run.id}/change/").content.decode()
    response = operator.get(f"/api/v1/runs/{run.id}/")
    assert response["Content-Type"] == "application/json" and response["X-Content-Type-Options"] == "nosniff"
    assert response.json()["output"].startswith(SCRIPT)


def test_markdown_images_and_links_in_model_output_are_never_fetched_by_the_server(replay_agent, operator,
                                                                                    compliance, tripwire):
    base = tripwire.base
    final = f"Summary ![chart]({base}/img.png?d=secret) and [details]({base}/link) <img src=\"{base}/tag.png\">"
    run = run_script({"turns": [], "final": final})
    assert run.status == "succeeded" and base in run.output
    operator.get(f"/api/v1/runs/{run.id}/")
    operator.get(f"/api/v1/runs/{run.id}/events/")
    compliance.get("/api/v1/receipts/export/?format=jsonl")
    page = _admin().get(f"/admin/runs/run/{run.id}/change/")
    assert "img-src 'self' data:" in page["Content-Security-Policy"], "nor may a browser showing it"
    assert tripwire == []


def test_csv_exports_neutralise_cells_a_spreadsheet_would_run(replay_agent, compliance):
    for name in ("=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)"):
        user = User.objects.create_user(name, password="x")
        user.groups.add(Group.objects.get(name="operators"))
        run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps({"turns": []}), caller=user)
        services.run_advance(run_id=run.id)
    export = compliance.get("/api/v1/receipts/export/?format=csv")
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    callers = {row["caller"] for row in rows}
    assert {"'=HYPERLINK(\"http://x\")", "'+1+2", "'-2+3", "'@SUM(A1)"} <= callers
    assert not any(cell[:1] in "=+-@" for row in rows for cell in row.values() if cell)


@pytest.mark.parametrize("value, shown", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("plain", "plain"), (None, ""), (42, "42"),
])
def test_neutralise(value, shown):
    assert neutralise(value) == shown
