"""The gate, on plain data: each rule refuses, asks for a human or lets a call through. No database."""

from dataclasses import replace

import pytest

from governance import redaction
from governance.engine import PolicyEvaluationError, PolicySpec
from governance.gate import ALLOWED, NeedsApproval, Refused, RunFacts, gate
from runs import provenance

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
          "required": ["to"], "additionalProperties": False}
SECOPS = PolicySpec(id=7, name="side-effects-need-secops", type="tool_approval", version=3,
                    target_tools=("send_email",), approver_role="secops", approval_ttl_seconds=600)
MAIL = {"name": "send_email", "arguments": {"to": "dana@example.com", "body": "Hello"}}


def _tool(name: str, *, side_effect: bool = False, **extra) -> dict:
    return {"name": name, "description": f"The {name} tool.", "input_schema": SCHEMA, "side_effect": side_effect,
            "source": "python", "trusted": True, "requires_approval": False, "approver_role": ""} | extra


def snapshot(**changes) -> dict:
    tools = {"get_account": _tool("get_account"), "send_email": _tool("send_email", side_effect=True)}
    return {"agent": {"slug": "crm", "tools": list(tools)}, "tools": tools, "granted_tools": sorted(tools),
            "skills": [], "taint_approver_role": "secops", "limits": {"max_approval_requests": 2}} | changes


def facts(**changes) -> RunFacts:
    return RunFacts(**{"input_text": "Write to Dana.", "policies": []} | changes)


def test_a_read_only_call_of_a_clean_run_goes_ahead():
    assert gate({"name": "get_account", "arguments": {"to": "A-100"}}, snapshot(), facts()) == ALLOWED


def test_a_side_effect_call_of_a_clean_run_without_a_policy_goes_ahead():
    assert gate(MAIL, snapshot(), facts()) == ALLOWED


def test_a_tool_the_agent_does_not_have_is_unknown():
    refused = gate({"name": "delete_account", "arguments": {}}, snapshot(), facts())
    assert isinstance(refused, Refused) and refused.code == "unknown_tool"


def test_a_tool_not_granted_to_the_callers_roles_is_not_permitted():
    refused = gate(MAIL, snapshot(granted_tools=["get_account"]), facts(policies=[SECOPS]))
    assert (refused.code, refused.reason) == ("not_permitted", "the caller's roles may not use 'send_email'")


def test_a_grant_revoked_since_the_run_started_is_not_permitted():
    refused = gate(MAIL, snapshot(), facts(granted_now=lambda: {"get_account"}))
    assert refused.code == "not_permitted"
    assert gate(MAIL, snapshot(), facts(granted_now=lambda: {"get_account", "send_email"})) == ALLOWED


def test_an_active_skills_contract_refuses_a_tool_outside_it():
    skills = [{"name": "review", "allowed_tools": ["get_account"], "side_effects": []}]
    refused = gate(MAIL, snapshot(skills=skills), facts(active_skills=["review"]))
    assert refused.code == "not_permitted" and "outside the active skill's allowed tools" in refused.reason
    assert gate(MAIL, snapshot(skills=skills), facts()) == ALLOWED  # only an active skill binds


def test_a_skill_must_declare_the_side_effects_it_allows():
    undeclared = [{"name": "outreach", "allowed_tools": ["send_email"], "side_effects": []}]
    refused = gate(MAIL, snapshot(skills=undeclared), facts(active_skills=["outreach"]))
    assert refused.code == "not_permitted" and "does not declare it among its side effects" in refused.reason
    declared = [{"name": "outreach", "allowed_tools": ["send_email"], "side_effects": ["send_email"]}]
    assert gate(MAIL, snapshot(skills=declared), facts(active_skills=["outreach"])) == ALLOWED


def test_a_skill_without_a_contract_constrains_nothing():
    skills = [{"name": "notes", "allowed_tools": [], "side_effects": []}]
    assert gate(MAIL, snapshot(skills=skills), facts(active_skills=["notes"])) == ALLOWED


def test_arguments_that_break_the_schema_are_refused_with_where():
    refused = gate({"name": "send_email", "arguments": {"to": 5}}, snapshot(), facts())
    assert (refused.code, refused.path) == ("invalid_arguments", ["to"])


def test_a_side_effect_waits_for_the_role_the_default_policy_names():
    needed = gate(MAIL, snapshot(), facts(policies=[SECOPS]))
    assert isinstance(needed, NeedsApproval)
    assert (needed.approver_role, needed.ttl_seconds) == ("secops", 600)
    assert needed.policy["policy"] == "side-effects-need-secops" and needed.policy["matched"] == ["send_email"]
    assert needed.reasons == ["policy side-effects-need-secops v3"]
    assert gate({"name": "get_account", "arguments": {"to": "A-1"}}, snapshot(), facts(policies=[SECOPS])) == ALLOWED


def test_a_tool_that_requires_approval_waits_for_its_own_role_and_fails_closed_without_one():
    tools = snapshot()["tools"] | {"get_account": _tool("get_account", requires_approval=True, approver_role="finance")}
    needed = gate({"name": "get_account", "arguments": {"to": "A-1"}}, snapshot(tools=tools), facts())
    assert (needed.approver_role, needed.reasons) == ("finance", ["tool get_account requires approval"])
    tools["get_account"]["approver_role"] = ""
    with pytest.raises(PolicyEvaluationError):
        gate({"name": "get_account", "arguments": {"to": "A-1"}}, snapshot(tools=tools), facts())


def test_a_tainted_run_waits_for_the_taint_approver_on_side_effects_only():
    tainted = facts(tainted=True, taint_reasons=["input: override", "result of list_open_tickets: untrusted source"])
    needed = gate(MAIL, snapshot(), tainted)
    assert needed.approver_role == "secops" and needed.policy is None
    assert needed.reasons == ["the run is tainted: input: override; result of list_open_tickets: untrusted source"]
    assert gate({"name": "get_account", "arguments": {"to": "A-1"}}, snapshot(), tainted) == ALLOWED
    # With a policy as well, the policy names the role and the taint is a further reason.
    with_policy = gate(MAIL, snapshot(), replace(tainted, policies=[SECOPS]))
    assert with_policy.reasons[0] == "policy side-effects-need-secops v3" and with_policy.reasons[1].startswith("the run is tainted")


def test_a_tainted_side_effect_with_no_taint_approver_role_fails_closed():
    with pytest.raises(PolicyEvaluationError, match="no approver role is configured for tainted runs"):
        gate(MAIL, snapshot(taint_approver_role=""), facts(tainted=True, taint_reasons=["input: override"]))


def test_a_secret_in_outgoing_arguments_waits_for_a_human():
    key = "sk-" + "x" * 24
    call = {"name": "send_email", "arguments": {"to": "dana@example.com", "body": f"the key is {key}"}}
    needed = gate(call, snapshot(), facts(leaks=lambda arguments: redaction.leaks(arguments)))
    assert (needed.approver_role, needed.reasons) == ("secops", ["the arguments carry a secret: api_keys"])


def test_an_address_that_is_not_what_it_looks_like_waits_for_a_human():
    call = {"name": "send_email", "arguments": {"to": "dana@ex\u0430mple.com"}}
    needed = gate(call, snapshot(), facts(spoofed=provenance.flags))
    assert needed.reasons[0].startswith("an address or URL is not what it looks like: argument to:")


def test_once_the_run_has_raised_its_approval_requests_a_new_one_is_refused():
    at_cap = facts(policies=[SECOPS], approval_requests=2)
    refused = gate(MAIL, snapshot(), at_cap)
    assert refused.code == "approval_limit" and "already raised 2 approval requests" in refused.reason
    # A call whose request is one of those raised is not a new request: it is decided as usual.
    assert isinstance(gate(MAIL, snapshot(), replace(at_cap, asked=True)), NeedsApproval)
    assert gate({"name": "get_account", "arguments": {"to": "A-1"}}, snapshot(), at_cap) == ALLOWED


def test_without_arguments_as_in_the_policy_lab_the_argument_checks_are_skipped():
    lab_call = {"name": "send_email", "arguments": None}
    assert gate(lab_call, snapshot(), facts(leaks=lambda arguments: ["api_keys"])) == ALLOWED
    assert isinstance(gate(lab_call, snapshot(), facts(policies=[SECOPS])), NeedsApproval)
