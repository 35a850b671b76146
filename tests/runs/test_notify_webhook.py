"""The notification webhook (runs.notify_webhook) against a real HTTP server on loopback that
checks the signature the way a receiver would, with its own HMAC."""

import hashlib
import hmac
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from runs import notify, notify_webhook, services
from runs.models import ApprovalRequest, Run
from tests import loopback

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-the-receiver"


class Receiver(ThreadingHTTPServer):
    """A notice receiver that checks each signature with SECRET (tests/services uses it too)."""

    allow_reuse_address = True

    def __init__(self, port: int = 0):  # 0: a port the system picks, free whatever else runs beside it
        super().__init__(("127.0.0.1", port), Handler)
        self.received, self.answer = [], 204
        self.port = self.server_address[1]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the name http.server calls)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        timestamp, signature = self.headers["X-Warrant-Timestamp"], self.headers["X-Warrant-Signature"]
        expected = "sha256=" + hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
        signed = hmac.compare_digest(expected, signature) and abs(time.time() - int(timestamp)) < 300
        self.server.received.append({"signed": signed, "body": json.loads(body), "raw": body})
        self.send_response(self.server.answer if signed else 401)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    with loopback.running(Receiver()) as server:
        settings.WARRANT_NOTIFY_WEBHOOK_URL = f"http://127.0.0.1:{server.port}/warrant"
        settings.WARRANT_NOTIFY_WEBHOOK_SECRET = SECRET
        settings.WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS = ("127.0.0.1",)
        settings.WARRANT_PUBLIC_URL = "https://warrant.example.test"
        yield server


def _parked(capture) -> ApprovalRequest:
    with capture(execute=True):
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                    caller=get_user_model().objects.get(username="operator"))
        services.run_advance(run_id=run.id)
    return ApprovalRequest.objects.get(run=run)


def test_a_park_and_its_decision_are_posted_signed_and_without_the_arguments(
        demo, approver, receiver, django_capture_on_commit_callbacks):
    approval = _parked(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert approver.post(f"/api/v1/approvals/{approval.id}/approve/", {}, format="json").status_code == 200
    assert [r["signed"] for r in receiver.received] == [True, True]
    raised, decided = (r["body"] for r in receiver.received)
    assert raised["event"] == "approval.requested" and decided["event"] == "approval.decided"
    assert raised["approval_id"] == str(approval.id) and raised["run_id"] == str(approval.run_id)
    assert raised["tool"] == "delete_account" and raised["agent"] == "crm-assistant"
    assert raised["approver_role"] == "secops" and raised["status"] == "pending"
    assert raised["link"] == f"https://warrant.example.test/admin/runs/approvalrequest/{approval.id}/change/"
    assert decided["status"] == "approved"
    assert decided["link"] == f"https://warrant.example.test/admin/runs/run/{approval.run_id}/change/"
    for value in approval.arguments.values():
        assert str(value).encode() not in receiver.received[0]["raw"] + receiver.received[1]["raw"]


def test_a_receiver_that_fails_is_counted_and_the_run_still_parks(demo, receiver, django_capture_on_commit_callbacks):
    receiver.answer = 503
    before = notify.FAILURES["webhook"]
    approval = _parked(django_capture_on_commit_callbacks)
    assert len(receiver.received) == 1
    assert notify.FAILURES["webhook"] == before + 1
    assert Run.objects.get(id=approval.run_id).status == "awaiting_approval"


def test_a_host_off_the_allow_list_is_not_reached(demo, receiver, settings, django_capture_on_commit_callbacks):
    settings.WARRANT_NOTIFY_WEBHOOK_ALLOWED_HOSTS = ("hooks.example.com",)
    before = notify.FAILURES["webhook"]
    _parked(django_capture_on_commit_callbacks)
    assert receiver.received == [] and notify.FAILURES["webhook"] == before + 1


def test_without_a_secret_nothing_is_sent(demo, receiver, settings, django_capture_on_commit_callbacks):
    settings.WARRANT_NOTIFY_WEBHOOK_SECRET = ""
    before = notify.FAILURES["webhook"]
    _parked(django_capture_on_commit_callbacks)
    assert receiver.received == [] and notify.FAILURES["webhook"] == before + 1


def test_verify_refuses_a_changed_body_another_secret_and_an_old_timestamp():
    body, timestamp = b'{"event":"approval.requested"}', str(int(time.time()))
    signature = notify_webhook.sign(SECRET, timestamp, body)
    assert notify_webhook.verify(SECRET, timestamp, body, signature)
    assert not notify_webhook.verify(SECRET, timestamp, body + b" ", signature)
    assert not notify_webhook.verify("another", timestamp, body, signature)
    assert not notify_webhook.verify(SECRET, timestamp, body, signature, now=int(timestamp) + 3600)
    assert not notify_webhook.verify(SECRET, "soon", body, signature)
