"""Budgets, their extensions and per-tool caps in harness.step() itself (runs.budget). No database:
the snapshot, model and tools are test_harness_unit's; the decisions are what runs.advance hands in."""

import pytest

from runs import harness
from runs.state import RunState
from runs.states import RunStatus
from tests.runs.test_harness_unit import SECOPS, Model, Tools, deps, snapshot, step

LOOKUP = [("get_account", {"account_id": "A-1"})]
SMALL_REPLY = {"name": "test", "model": "m-1", "backend": "scripted", "max_tokens": 10}


def _decided(park: harness.ParkBudget, status: str, reason: str = "") -> dict:
    return {harness.decision_key(park.call_id, park.arguments_sha256): {"id": "ap-1", "status": status,
                                                                       "reason": reason}}


def _events(result, kind):
    return [data for name, data in result.events if name == kind]


def test_a_model_call_estimated_over_the_tokens_left_is_refused_before_it_is_made():
    model = Model("Done.")
    result = step(harness.initial_state("Go."), snapshot(max_tokens=500), deps(model))
    assert result.outcome == harness.Finish(RunStatus.STOPPED, stop_reason="token_budget")
    assert model.requests == []  # not made, so not paid for
    [refused] = _events(result, "model_call_refused")
    # The default reply allowance (4,096 tokens) alone is over 500.
    assert refused["estimated_tokens"] > 4_096 and refused["tokens_left"] == 500
    assert result.state["input_tokens"] + result.state["output_tokens"] == 0


def test_the_estimate_counts_the_request_and_the_profiles_reply_allowance():
    model = Model("Done.")
    # The request alone is some hundred tokens: with a reply of at most 10 it fits in 1,000.
    result = step(harness.initial_state("Go."), snapshot(max_tokens=1_000, model_profile=SMALL_REPLY), deps(model))
    assert result.outcome == harness.Finish(RunStatus.SUCCEEDED, output="Done.") and len(model.requests) == 1
    too_small = step(harness.initial_state("Go."), snapshot(max_tokens=50, model_profile=SMALL_REPLY), deps(Model()))
    assert too_small.outcome.stop_reason == "token_budget"


def test_with_a_budget_role_a_refused_call_parks_asking_for_what_it_needs():
    model = Model("Done.")
    snap = snapshot(max_tokens=500, budget_role="finance")
    parked = step(harness.initial_state("Go."), snap, deps(model))
    park = parked.outcome
    assert isinstance(park, harness.ParkBudget) and model.requests == []
    assert park.approver_role == "finance" and park.tool == "" and park.call_id == "budget:token_budget:1"
    estimated = park.budget["estimated"]
    # The same amount again, or what the call needs over what is left when that is more.
    assert park.budget == {"kind": "token_budget", "used": 0, "limit": 500, "asked": estimated - 500,
                           "estimated": estimated}
    assert park.arguments == {"kind": "token_budget", "asked": estimated - 500}
    assert parked.state["parks"] == 1 and parked.state["budget_ask"]["call_id"] == park.call_id
    # Approved: the extension is the run's, and the call is made in the step that resumes it.
    resumed = step(parked.state, snap, deps(model), decisions=_decided(park, "approved"))
    assert resumed.outcome == harness.Finish(RunStatus.SUCCEEDED, output="Done.") and len(model.requests) == 1
    assert resumed.state["extensions"] == {"token_budget": estimated - 500} and resumed.state["budget_ask"] is None
    [extended] = _events(resumed, "budget_extended")
    assert extended == {"kind": "token_budget", "approval_id": "ap-1", "decision": "approved",
                        "asked": estimated - 500, "limit": estimated}


@pytest.mark.parametrize("status", ["denied", "expired"])
def test_a_denied_or_expired_extension_stops_the_run_as_it_would_have_stopped(status):
    snap = snapshot(max_turns=1, budget_role="finance")
    model = Model(LOOKUP, "Done.")
    first = step(harness.initial_state("Go."), snap, deps(model))  # one turn and its lookup
    parked = step(first.state, snap, deps(model))
    assert isinstance(parked.outcome, harness.ParkBudget)
    assert parked.outcome.budget == {"kind": "max_turns", "used": 1, "limit": 1, "asked": 1}
    ended = step(parked.state, snap, deps(model), decisions=_decided(parked.outcome, status, "not this month"))
    assert ended.outcome == harness.Finish(RunStatus.STOPPED, stop_reason="max_turns",
                                           message=f"the turns extension asked for was {status}")
    assert _events(ended, "budget_refused") == [{"kind": "max_turns", "approval_id": "ap-1", "decision": status,
                                                 "reason": "not this month"}]
    assert len(model.requests) == 1


def test_a_run_still_waiting_on_its_ask_parks_on_the_same_request():
    snap = snapshot(max_turns=1, budget_role="finance")
    model = Model(LOOKUP)
    parked = step(step(harness.initial_state("Go."), snap, deps(model)).state, snap, deps(model))
    again = step(parked.state, snap, deps(model), decisions=_decided(parked.outcome, "pending"))
    assert again.outcome == parked.outcome and again.state["budget_asks"] == 1


def test_each_extension_is_a_new_ask_and_they_add_up():
    snap = snapshot(max_turns=1, budget_role="finance")
    model = Model(LOOKUP, LOOKUP, "Done.")
    state = step(harness.initial_state("Go."), snap, deps(model)).state
    for number in (1, 2):
        parked = step(state, snap, deps(model))
        assert parked.outcome.call_id == f"budget:max_turns:{number}"
        assert parked.outcome.budget["limit"] == number
        state = step(parked.state, snap, deps(model), decisions=_decided(parked.outcome, "approved")).state
    assert state["extensions"] == {"max_turns": 2} and state["turns"] == 3 and state["phase"] == "done"


def test_the_tool_budget_asks_before_the_call_over_it_runs():
    tools = Tools()
    snap = snapshot(max_tool_calls=1, budget_role="finance")
    model = Model([*LOOKUP, ("get_account", {"account_id": "A-2"})], "Done.")
    parked = step(harness.initial_state("Go."), snap, deps(model, tools))
    assert isinstance(parked.outcome, harness.ParkBudget) and parked.outcome.budget["kind"] == "tool_budget"
    assert tools.ran == [("get_account", None)]
    resumed = step(parked.state, snap, deps(model, tools), decisions=_decided(parked.outcome, "approved"))
    assert [name for name, _ in tools.ran] == ["get_account", "get_account"]
    assert isinstance(resumed.outcome, harness.Continue) and resumed.state["extensions"] == {"tool_budget": 1}


def test_a_deadline_extension_moves_the_deadline_on_by_the_agents_deadline():
    snap = snapshot(deadline_seconds=60, budget_role="finance")
    parked = step(harness.initial_state("Go."), snap, deps(Model()), deadline=900.0)  # now is 1,000
    assert parked.outcome.budget == {"kind": "deadline", "used": 60, "limit": 60, "asked": 60}
    model = Model("Done.")
    late = step(parked.state, snap, deps(model), decisions=_decided(parked.outcome, "approved"), deadline=900.0)
    assert late.outcome.call_id == "budget:deadline:2"  # 900 + 60 is still before 1,000: it asks again
    done = step(late.state, snap, deps(model), decisions=_decided(late.outcome, "approved"), deadline=900.0)
    assert done.outcome == harness.Finish(RunStatus.SUCCEEDED, output="Done.")


def test_without_a_budget_role_a_spent_budget_stops_the_run_as_before():
    snap = snapshot(max_turns=1)
    model = Model(LOOKUP, "Done.")
    first = step(harness.initial_state("Go."), snap, deps(model))
    assert step(first.state, snap, deps(model)).outcome == harness.Finish(RunStatus.STOPPED, stop_reason="max_turns")


def test_a_call_over_its_tools_cap_is_refused_and_the_model_reads_why():
    tools = Tools()
    snap = snapshot(tool_caps={"get_account": 1})
    model = Model([*LOOKUP, ("get_account", {"account_id": "A-2"}), ("list_open_tickets", {"account_id": "A-1"})],
                  [("get_account", {"account_id": "A-3"})], "Done.")
    state = harness.initial_state("Go.")
    results = []
    while not isinstance((result := step(state, snap, deps(model, tools))).outcome, harness.Finish):
        results.append(result)
        state = result.state
    assert result.outcome.status == RunStatus.SUCCEEDED
    assert [name for name, _ in tools.ran] == ["get_account", "list_open_tickets"]
    refused = [data for r in results for data in _events(r, "tool_refused")]
    assert [(r["tool"], r["code"]) for r in refused] == [("get_account", "tool_cap"), ("get_account", "tool_cap")]
    told = [m for m in result.state["messages"] if m["role"] == "tool" and '"tool_cap"' in m["content"]]
    assert len(told) == 2 and "at most 1 time in a run" in told[0]["content"]
    assert result.state["tool_uses"] == {"get_account": 1, "list_open_tickets": 1}
    assert result.state["tool_calls"] == 4  # refused calls count against the tool budget, as every refusal does


def test_a_call_that_needs_approval_over_its_cap_is_refused_without_asking_anyone():
    tools = Tools()
    snap = snapshot(tool_caps={"delete_account": 1}, policies=[SECOPS])
    model = Model([("delete_account", {"account_id": "A-1"})])
    state = step(harness.initial_state("Go."), snap, deps(model, tools)).state
    assert isinstance(step(state, snap, deps(model, tools)).outcome, harness.Park)  # under its cap: asked
    state["tool_uses"] = {"delete_account": 1}  # as after an approved call ran
    batch = step(state, snap, deps(model, tools))
    assert isinstance(batch.outcome, harness.Continue) and tools.ran == []
    assert [data["code"] for data in _events(batch, "tool_refused")] == ["tool_cap"]


def test_a_state_written_before_budgets_reads_with_none_granted():
    stored = RunState.start("Go.").to_json()
    for key in ("extensions", "budget_ask", "budget_asks", "tool_uses"):
        del stored[key]
    state = RunState.from_json(stored)
    assert (state.extensions, state.budget_ask, state.budget_asks, state.tool_uses) == ({}, None, 0, {})


def test_budget_asks_do_not_count_against_the_runs_approval_requests():
    snap = snapshot(policies=[SECOPS], budget_role="finance")  # at most 5 approval requests a run
    model = Model([("delete_account", {"account_id": "A-1"})])
    state = step(harness.initial_state("Go."), snap, deps(model)).state
    asks = {f"budget:max_turns:{n}:digest": {"id": f"b{n}", "status": "approved", "reason": ""} for n in range(1, 6)}
    parked = step(state, snap, deps(model), decisions=asks)
    assert isinstance(parked.outcome, harness.Park) and parked.outcome.tool == "delete_account"
    # Five requests of the model's calls do use them up.
    calls = {f"call_9_{n}:digest": {"id": f"a{n}", "status": "approved", "reason": ""} for n in range(1, 6)}
    refused = step(state, snap, deps(model), decisions=calls)
    assert [data["code"] for data in _events(refused, "tool_refused")] == ["approval_limit"]
