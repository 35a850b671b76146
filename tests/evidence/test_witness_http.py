"""The HTTP witness sink posts through the egress client (core/egress.py), as every other outbound
call does: it ignores a proxy named in the environment (a proxy would see, and could drop, every
checkpoint), it never follows a redirect (the witness's answer is final: a redirect elsewhere is a
failure recorded and retried, not a second destination), and a host off the allow-list gets nothing."""

import json
from http.server import BaseHTTPRequestHandler

import pytest
from django.contrib.auth.models import User

from runs import services
from runs.models import Receipt, WitnessSink
from runs.witness import witness_catch_up
from tests import loopback

pytestmark = pytest.mark.django_db(transaction=True)


class _Witness(BaseHTTPRequestHandler):
    received: list = []
    redirect = False
    port = 0  # the loopback port the system gave the server

    def do_POST(self):
        document = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if _Witness.redirect and self.path == "/checkpoints":
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{_Witness.port}/elsewhere")
            self.end_headers()
            return
        _Witness.received.append((self.path, document))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_witness(demo, settings):
    _Witness.received, _Witness.redirect = [], False
    with loopback.serving(_Witness) as server:  # a free port: other suites run beside this one
        _Witness.port = server.server_address[1]
        settings.WARRANT_WITNESS_FILE = ""
        settings.WARRANT_WITNESS_INTERVAL_SECONDS = 0
        settings.WARRANT_WITNESS_URL = f"http://127.0.0.1:{_Witness.port}/checkpoints"
        settings.WARRANT_WITNESS_ALLOWED_HOSTS = ("127.0.0.1",)
        yield _Witness


def _seal() -> Receipt:
    services.run_start(agent_slug="crm-assistant", input_text="List all accounts.",
                       caller=User.objects.get(username="operator"))
    return Receipt.objects.order_by("-seq").first()


def test_a_proxy_in_the_environment_is_not_used(http_witness, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9/")  # nothing listens there: a proxy used would fail
    receipt = _seal()
    assert http_witness.received == [("/checkpoints", http_witness.received[0][1])]
    assert http_witness.received[0][1]["head"] == receipt.hash
    assert WitnessSink.objects.get(name="http").delivered_seq == receipt.seq


def test_a_redirect_is_a_failure_and_is_not_followed(http_witness):
    http_witness.redirect = True
    _seal()
    sink = WitnessSink.objects.get(name="http")
    assert sink.failed_at is not None and sink.error == "the witness answered HTTP 307"
    assert http_witness.received == []  # /elsewhere was never posted to
    http_witness.redirect = False
    assert witness_catch_up()["http"] == "delivered #1"


def test_a_host_off_the_allow_list_gets_nothing_from_the_egress_client(http_witness, settings):
    settings.WARRANT_WITNESS_URL = f"http://localhost:{http_witness.port}/checkpoints"  # the same server, by another name
    _seal()
    assert WitnessSink.objects.get(name="http").error == ("the witness URL's host is not in "
                                                          "WARRANT_WITNESS_ALLOWED_HOSTS")
    assert http_witness.received == []
