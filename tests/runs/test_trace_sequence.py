"""The trace is numbered from a counter on the run's row: other writers in mid-step, many events at once."""

import json

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import F

from agents.models import Agent, ModelProfile, Tool
from agents.services import agent_publish
from governance.models import ToolGrant
from runs import services
from runs.events import write_events
from runs.lifecycle import approval_request_for
from runs.models import ApprovalRequest, Run

pytestmark = pytest.mark.django_db


def _seqs(run: Run) -> list[int]:
    return list(run.events.order_by("seq").values_list("seq", flat=True))


@pytest.fixture
def replay_agent(demo):
    profile = ModelProfile.objects.create(name="replay", backend="replay", model="replay-1")
    agent = Agent.objects.create(slug="replayer", name="Replayer", instructions="Follow the script.",
                                 model_profile=profile)
    tool = Tool.objects.create(name="cancelling_lookup", description="Looks something up.",
                               input_schema={"type": "object"}, handler="tests.runs.backends.cancel_through_the_service")
    ToolGrant.objects.create(role=Group.objects.get(name="operators"), tool=tool)
    note = Tool.objects.create(name="send_note", description="Sends a note.", input_schema={"type": "object"},
                               side_effect=True, handler="tests.runs.backends.cancel_through_the_service")
    ToolGrant.objects.create(role=Group.objects.get(name="operators"), tool=note)
    agent.tools.set(Tool.objects.all())
    agent_publish(agent=agent)
    return agent


def test_an_event_written_by_a_cancel_in_mid_step_is_numbered_between_the_steps_events(replay_agent):
    script = {"turns": [[{"name": "cancelling_lookup", "arguments": {}}], [{"name": "send_note", "arguments": {}}]]}
    run, _ = services.run_start(agent_slug="replayer", input_text=json.dumps(script),
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    # The cancel's event went in while the tool ran; the step's own events come after it. The
    # step went on to the next model call (fast turns share a step), which asked for a side
    # effect: that ends the step, and the run stops at its checkpoint, the side effect not run.
    assert kinds.index("cancel_requested") < kinds.index("tool_call") and kinds[-1] == "run_finished", kinds
    assert (run.status, run.llm_calls, run.tool_calls) == ("cancelled", 2, 1)
    assert _seqs(run) == list(range(1, len(kinds) + 1)) and run.event_seq == len(kinds)


def test_a_step_with_more_events_than_one_statement_takes_is_written_whole(demo):
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    many = 2_000  # past SQLite's 999 parameters per statement at six columns a row
    with transaction.atomic():
        Run.objects.filter(id=run.id).update(event_seq=F("event_seq") + many)
        write_events(run, 2, [(0, "note", {"n": n}) for n in range(many)])
    run.refresh_from_db()
    assert _seqs(run) == list(range(1, many + 2)) and run.event_seq == many + 1
    assert [e["n"] for e in run.events.filter(kind="note").order_by("seq").values_list("data", flat=True)] == list(range(many))


def test_a_call_parked_again_finds_its_request_instead_of_a_second_one(demo):
    """The request is inserted first; the unique (run, call, digest) hands back the one already there."""
    from runs.harness import Park

    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    park = Park(call_id="call_9", step=3, tool="delete_account", arguments={"account_id": "A-1"},
                arguments_sha256="ab" * 32, approver_role="secops", ttl_seconds=60, policy=None,
                reasons=["bench"], rationale="")
    role = Group.objects.get(name="secops")
    with transaction.atomic():
        first = approval_request_for(run, park, role)
        again = approval_request_for(run, park, role)  # its failed insert must not end the transaction
        other = approval_request_for(run, Park(**{**park.__dict__, "arguments_sha256": "cd" * 32}), role)
    assert again.id == first.id and other.id != first.id
    assert ApprovalRequest.objects.filter(run=run).count() == 2


def test_the_start_goes_with_the_first_model_call_and_read_only_calls_with_theirs(demo, monkeypatch):
    """The start's screening, policies and skill matching are checkpointed with the first model
    call, and each read-only call with the model call that asked for it, not as steps of their
    own. With one model call a step (STEP_SECONDS 0), each step holds one model call."""
    from runs import advance

    monkeypatch.setattr(advance, "STEP_SECONDS", 0.0)
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.tool_calls > 0
    first_step = list(run.events.filter(step=0).values_list("kind", flat=True))
    assert "skill_activated" in first_step and "model_call" in first_step and "tool_call" in first_step
    assert run.step == run.llm_calls
    for step in range(run.step):
        kinds = [k for k in run.events.filter(step=step).order_by("seq").values_list("kind", flat=True)
                 if k in ("model_call", "tool_call")]
        assert kinds[0] == "model_call" and kinds.count("model_call") == 1, (step, kinds)


def test_fast_model_calls_share_a_step_and_its_checkpoint(demo):
    """The scripted model answers at once: its turns, and the read-only calls they ask for, go on
    in one step, saved by one checkpoint, as long as no call has a side effect or waits."""
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.llm_calls > 1 and run.tool_calls > 0
    assert run.step == 1 and set(run.events.filter(kind="model_call").values_list("step", flat=True)) == {0}


def test_a_side_effect_waits_for_a_step_after_the_model_call_that_asked_for_it(demo):
    """A read-only call goes with its model call (get_account here); a side effect (the delete the
    next reply asks for) does not: it parks in a step of its own, so a redelivered model step can
    never repeat it."""
    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "awaiting_approval"
    asked = run.events.get(kind="approval_requested")
    model_steps = set(run.events.filter(kind="model_call").values_list("step", flat=True))
    assert asked.step not in model_steps and asked.data["tool"] == "delete_account"
    assert run.events.filter(kind="tool_call", step__in=model_steps).exists()


def test_the_embedded_default_names_its_worker_by_host_and_process(demo, django_capture_on_commit_callbacks):
    """With no broker the run advances in the caller's process; the lease's owner still names
    host and process, so two hosts sharing a database never take each other's lease for their own."""
    import os
    import socket

    with django_capture_on_commit_callbacks(execute=True):  # the commit that hands the run on
        run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                    caller=User.objects.get(username="operator"))
    claimed = run.events.filter(kind="claimed").values_list("data", flat=True).first()
    assert claimed["worker"] == f"{socket.gethostname()}:{os.getpid()}"


def _claimed_run(demo) -> Run:
    from runs.lifecycle import run_claim

    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    return run_claim(run.id, "w-test")


def _park(**changes):
    from runs.harness import Park

    return Park(**{"call_id": "call_1_1", "step": 1, "tool": "delete_account", "arguments": {"account_id": "A-1"},
                   "arguments_sha256": "ab" * 32, "approver_role": "secops", "ttl_seconds": 60, "policy": None,
                   "reasons": ["test"], "rationale": ""} | changes)


def _checkpoint(run: Run, park, events=()):
    from runs.harness import StepResult
    from runs.lifecycle import run_checkpoint

    return run_checkpoint(run, "w-test", StepResult(state=run.state, outcome=park, events=list(events)))


def test_a_step_that_parks_is_saved_with_its_park_in_one_write(demo):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = _claimed_run(demo)
    with CaptureQueriesContext(connection) as seen:
        run = _checkpoint(run, _park(), events=[("note", {"n": 1})])
    run_updates = [q["sql"] for q in seen.captured_queries if q["sql"].startswith('UPDATE "runs_run"')]
    assert run.status == "awaiting_approval" and len(run_updates) == 1
    request = ApprovalRequest.objects.get(run=run)
    tail = list(run.events.order_by("seq").values_list("step", "kind", "data"))[-2:]
    assert [(step, kind) for step, kind, _ in tail] == [(0, "note"), (1, "approval_requested")]
    assert tail[1][2]["approval_id"] == str(request.id) and _seqs(run) == list(range(1, run.event_seq + 1))


def test_a_step_that_parks_a_call_asked_about_before_finds_its_request(demo):
    """The one write is undone whole when the request is already there; the step is then saved
    and parked on that request, as it was before the write was one."""
    run = _claimed_run(demo)
    with transaction.atomic():
        existing = approval_request_for(run, _park(), Group.objects.get(name="secops"))
    run = _checkpoint(run, _park())
    assert run.status == "awaiting_approval" and ApprovalRequest.objects.filter(run=run).count() == 1
    asked = run.events.get(kind="approval_requested")
    assert asked.data["approval_id"] == str(existing.id) and _seqs(run) == list(range(1, run.event_seq + 1))


def test_a_step_that_parks_for_a_role_that_is_gone_fails_the_run_closed(demo):
    run = _checkpoint(_claimed_run(demo), _park(approver_role="no-such-role"))
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", "policy_error") and not ApprovalRequest.objects.filter(run=run).exists()
    assert "approval_requested" not in run.events.values_list("kind", flat=True) and hasattr(run, "receipt")


def test_a_run_resumed_in_process_after_a_decision_goes_on_from_the_row_the_decision_wrote(
        demo, django_capture_on_commit_callbacks):
    """The embedded default claims the run a decision requeued as the decision wrote it (read
    without its snapshot and state, which are read once the run is claimed), not by reading the
    row again: the run goes on, its trace gapless and its receipt valid."""
    from runs.receipts import receipt_verify

    run, _ = services.run_start(agent_slug="crm-assistant", input_text="Delete the account Initech.",
                                caller=User.objects.get(username="operator"))
    services.run_advance(run_id=run.id)
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    with django_capture_on_commit_callbacks(execute=True):
        services.approval_decide(via="session", approval_id=approval.id, user=User.objects.get(username="approver"),
                                 approve=True)
    run.refresh_from_db()
    assert run.status == "succeeded" and receipt_verify(receipt=run.receipt).valid
    claims = list(run.events.filter(kind="claimed").values_list("data", flat=True))
    assert [c["delivery"] for c in claims] == [1, 1] and _seqs(run) == list(range(1, run.event_seq + 1))


def _claim_counting_trace_reads(run: Run) -> tuple[Run, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.lifecycle import run_claim

    with CaptureQueriesContext(connection) as seen:
        claimed = run_claim(run.id, "w-test")
    return claimed, sum(1 for q in seen.captured_queries if q["sql"].startswith("SELECT") and "runs_runevent" in q["sql"])


def _release(run: Run) -> None:
    from runs.lifecycle import run_release

    run_release(run, "w-test")  # back on the queue, for the run_advance that takes it to its end


def _tip_is_the_last_event(run: Run) -> bool:
    last = run.events.order_by("-seq").values_list("seq", "hash").first()
    return Run.objects.get(id=run.id).trace_tip == f"{last[0]}:{last[1]}"


def test_a_claim_chains_its_event_to_the_tip_the_row_carries_without_reading_the_trace(demo):
    from runs.receipts import receipt_verify

    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    assert _tip_is_the_last_event(run)
    claimed, trace_reads = _claim_counting_trace_reads(run)
    assert claimed is not None and trace_reads == 0 and _tip_is_the_last_event(run)
    _release(claimed)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded" and _tip_is_the_last_event(run) and receipt_verify(receipt=run.receipt).valid


def test_a_row_whose_tip_is_not_at_its_last_event_has_the_link_read_from_the_trace(demo):
    """A row written by a process that does not keep the tip (one from before it, in a rolling
    deploy) moves event_seq on and leaves the tip behind: the tip is then not used."""
    from runs.receipts import receipt_verify

    run, _ = services.run_start(agent_slug="crm-assistant", input_text="How healthy is Acme Corp?",
                                caller=User.objects.get(username="operator"))
    with transaction.atomic():
        Run.objects.filter(id=run.id).update(event_seq=F("event_seq") + 1)  # what the older writer did
        write_events(Run.objects.get(id=run.id), 2, [(0, "note", {"n": 1})])
    Run.objects.filter(id=run.id).update(trace_tip=Run.objects.get(id=run.id).trace_tip.replace("2:", "1:"))
    claimed, trace_reads = _claim_counting_trace_reads(run)
    assert claimed is not None and trace_reads == 1 and _tip_is_the_last_event(run)
    _release(claimed)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded" and receipt_verify(receipt=run.receipt).valid
