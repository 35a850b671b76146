"""Traces of a real run, as a collector receives them.

The production layout on loopback: runserver (through warrant/wsgi.py), a Celery worker (prefork,
through warrant/celery.py) and a Redis server of the test's own, over one SQLite file with the demo
loaded; both processes export over OTLP/HTTP to a receiver this test starts. The test decodes what
arrives and checks the spans of a run that parks for an approval and is resumed by it: one trace
across the two processes, the GenAI spans and attributes, the governance attributes, Django and
Celery instrumented, and the worker's JSON log lines naming the run and its trace.
"""

import json
import shutil
import time

import httpx
import pytest

from core.telemetry import run_trace_ids
from tests import loopback
from tests.browser.servers import ROOT, demo_with_tokens, live_env, runserver
from tests.observability.otlp import serve
from tests.services.processes import CeleryProcess, RedisServer

pytestmark = pytest.mark.slow
if not shutil.which("redis-server"):
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)

# observe's loopback ports (7160-7169) and Redis port (6461).
RECEIVER_PORT, SERVER_PORT, REDIS_PORT = 7161, 7162, 6461
INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER = 1, 2, 3, 4, 5  # OTLP span kinds


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("warrant-traced")
    receiver_server, receiver = serve(RECEIVER_PORT)
    redis_server = RedisServer(REDIS_PORT, data_dir)
    worker = None
    try:
        redis_server.start()
        env = {k: v for k, v in live_env(data_dir).items() if not k.startswith("OTEL_")}
        env.update(WARRANT_LOG_FORMAT="json", CELERY_BROKER_URL=redis_server.url, PYTHONPATH=str(ROOT))
        tokens = demo_with_tokens(env, ["operator", "approver"])
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{RECEIVER_PORT}", OTEL_SERVICE_NAME="warrant-test",
                   OTEL_BSP_SCHEDULE_DELAY="100",
                   # An HTTP witness sink on the receiver: the seal's checkpoint goes out through httpx.
                   WARRANT_WITNESS_URL=f"http://127.0.0.1:{RECEIVER_PORT}/witness",
                   WARRANT_WITNESS_ALLOWED_HOSTS="127.0.0.1")
        worker = CeleryProcess(["worker", "-n", "traced@warrant-test", "-c", "1", "-P", "prefork", "-l", "info",
                                "--without-gossip", "--without-mingle", "--without-heartbeat"],
                               env, data_dir / "worker.log").start()
        log_path = data_dir / "server.log"
        with runserver(env, SERVER_PORT, log_path) as base:
            worker.wait_ready()
            yield {"url": base, "tokens": tokens, "receiver": receiver, "log": log_path, "worker_log": worker.log}
    finally:
        # Whatever failed on the way: the worker, the Redis server and the receiver's socket go with the module.
        if worker is not None:
            worker.stop()
        redis_server.kill()
        loopback.stop(receiver_server)


def _api(traced, user: str, method: str, path: str, body=None, **headers):
    headers = {"Authorization": f"Token {traced['tokens'][user]}", **headers}
    answer = httpx.request(method, f"{traced['url']}/api/v1/{path}", json=body, headers=headers, timeout=30)
    assert answer.status_code < 400, answer.text
    return answer


def _wait_for(receiver, check, what: str):
    for _ in range(200):
        if check():
            return
        time.sleep(0.1)
    names = sorted({s.name for s in receiver.spans})
    raise AssertionError(f"{what}: not received; spans received: {names}")


def _run_reaches(traced, run_id: str, status: str) -> dict:
    for _ in range(300):
        run = _api(traced, "operator", "GET", f"runs/{run_id}/").json()
        if run["status"] == status:
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} is {run['status']}, not {status}; worker log: {traced['worker_log'].read_text()}")


def test_a_run_resumed_after_an_approval_is_one_trace_of_genai_spans(traced):
    receiver = traced["receiver"]
    started = _api(traced, "operator", "POST", "runs/", {"agent": "crm-assistant", "input": "Delete the account Initech."},
                   **{"X-Request-ID": "start-initech-1"})
    assert started.headers["X-Request-ID"] == "start-initech-1"
    run = _run_reaches(traced, started.json()["id"], "awaiting_approval")
    approval = run["pending_approval"]
    _api(traced, "approver", "POST", f"approvals/{approval['id']}/approve/", {"reason": "asked in writing"})
    _run_reaches(traced, run["id"], "succeeded")

    trace_id, root_id = (f"{n:0{w}x}" for n, w in zip(run_trace_ids(run["id"]), (32, 16)))
    slices = lambda: [s for s in receiver.named("invoke_agent ") if s.trace_id == trace_id]  # noqa: E731
    _wait_for(receiver, lambda: len(slices()) >= 2 and any(
        s.attributes.get("warrant.run.final_status") for s in slices()), "both slices of the run")
    first, resumed = sorted(slices(), key=lambda s: s.attributes["warrant.run.step"])
    assert first.service == "warrant-test"

    # One trace: the first slice is the run's root span; the resumed one is its child, and links to
    # the approval's request (another trace) that woke it.
    assert (first.span_id, first.parent_span_id) == (root_id, "")
    assert resumed.parent_span_id == root_id and resumed.trace_id == trace_id
    assert first.attributes["warrant.run.resumed"] is False and resumed.attributes["warrant.run.resumed"] is True
    for span in (first, resumed):
        assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert span.attributes["gen_ai.agent.id"] == "crm-assistant"
        assert span.attributes["gen_ai.conversation.id"] == run["id"] == span.attributes["warrant.run.id"]
        assert span.attributes["gen_ai.provider.name"] == "scripted" and span.attributes["gen_ai.request.model"]
    # Spans arrive in batches, by process and by when they end: the decision's request span may be
    # exported after both slices of the run it woke, so wait for it too (CI once saw it missing).
    approve_spans = lambda: [s for s in receiver.spans if s.kind == SERVER and "approve" in s.name]  # noqa: E731
    _wait_for(receiver, approve_spans, "the approval request's server span")
    approve_request = approve_spans()[0]
    assert approve_request.trace_id != trace_id
    assert any(link[0] == approve_request.trace_id for link in resumed.links)

    # Governance on the slices: the park, the decision with its role and wait, the budgets, the end.
    (parked,) = first.events_named("warrant.approval_requested")
    assert parked["gen_ai.tool.name"] == "delete_account" and parked["warrant.approval.role"] == "secops"
    assert first.attributes["warrant.run.status"] == "awaiting_approval"
    (decided,) = resumed.events_named("warrant.approval")
    assert decided["warrant.approval.role"] == "secops" and decided["warrant.approval.decision"] == "approved"
    assert decided["warrant.approval.id"] == approval["id"] and decided["warrant.approval.waited_seconds"] >= 0
    assert resumed.attributes["warrant.run.final_status"] == "succeeded"
    assert resumed.attributes["warrant.budget.turns.used"] <= resumed.attributes["warrant.budget.turns.max"]
    assert resumed.attributes["warrant.budget.tokens.max"] > 0 and resumed.attributes["warrant.run.tainted"] is False

    # A chat span per model call and an execute_tool span per tool call, each inside its slice.
    in_run = [s for s in receiver.spans if s.trace_id == trace_id]
    chats = [s for s in in_run if s.attributes.get("gen_ai.operation.name") == "chat"]
    tools = [s for s in in_run if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert chats and tools
    slice_ids = {first.span_id, resumed.span_id}
    for chat in chats:
        assert chat.name.startswith("chat ") and chat.kind == CLIENT and chat.parent_span_id in slice_ids
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] and chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["warrant.model.fallback"] is False and chat.events_named("warrant.model.attempt")
    deleted = [t for t in tools if t.attributes["gen_ai.tool.name"] == "delete_account"]
    assert len(deleted) == 1 and deleted[0].parent_span_id == resumed.span_id
    assert deleted[0].name == "execute_tool delete_account"
    assert deleted[0].attributes["gen_ai.tool.call.id"].startswith("call_")
    assert deleted[0].attributes["warrant.tool.side_effect"] is True and deleted[0].attributes["warrant.tool.ok"] is True
    assert deleted[0].attributes["warrant.approval.id"] == approval["id"]
    assert all(t.parent_span_id in slice_ids and t.attributes["gen_ai.tool.call.id"] for t in tools)

    # Django is instrumented (the requests are server spans), so is Celery: the web process publishes
    # the task inside the request's trace, the worker consumes it, and the slice links to that.
    post = next(s for s in receiver.spans if s.kind == SERVER and s.attributes.get("http.route", "").startswith("api/v1/runs")
                and s.attributes.get("http.request.method", s.attributes.get("http.method")) == "POST")
    published = [s for s in receiver.spans if s.kind == PRODUCER and s.trace_id == post.trace_id]
    consumed = [s for s in receiver.spans if s.kind == CONSUMER and s.trace_id == post.trace_id]
    assert published and consumed and consumed[0].name.endswith("runs.run_advance")
    assert any(link == (consumed[0].trace_id, consumed[0].span_id) for link in first.links)
    assert receiver.content_types == {"application/x-protobuf"}
    # httpx is instrumented: the checkpoint sent to the HTTP witness after the seal is a client span.
    _wait_for(receiver, lambda: receiver.witnessed and any(
        s.scope.startswith("opentelemetry.instrumentation.httpx") for s in receiver.spans), "the witness call's span")
    witness_call = next(s for s in receiver.spans if s.scope.startswith("opentelemetry.instrumentation.httpx"))
    assert witness_call.kind == CLIENT and witness_call.attributes.get(
        "url.full", witness_call.attributes.get("http.url", "")).endswith("/witness")

    # The worker's log lines are JSON, and those of a slice name the run, its caller and its trace.
    lines = [json.loads(x) for x in traced["worker_log"].read_text().splitlines() if x.startswith("{")]
    assert lines and all({"timestamp", "level", "logger", "message"} <= set(x) for x in lines)
    in_slice = [x for x in lines if x.get("run_id") == run["id"]]
    assert in_slice and all(x["trace_id"] == trace_id and x["user"] == "operator" for x in in_slice)
    # The request that started the run is named in the worker's lines for its task.
    assert any(x.get("request_id") == "start-initech-1" for x in lines)
