"""The factories make a governed set-up that runs on its own: an agent, its tool, a grant, an
approval policy and the people, none of them the demo's."""

import json

import pytest

from runs import services
from runs.models import ApprovalRequest, Run
from tests import factories

pytestmark = pytest.mark.django_db


def _run(agent, caller, script: dict) -> Run:
    run, _ = services.run_start(agent_slug=agent.slug, input_text=json.dumps(script), caller=caller)
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    return run


def _calculation(tool) -> dict:
    return {"turns": [[{"name": tool.name, "arguments": {"expression": "6 * 7"}}]], "final": "answer:"}


def test_a_factory_agent_runs_a_granted_tool_for_a_factory_caller(caller):
    tool = factories.tool()
    factories.grant(factories.CALLER_ROLE, tool)
    agent = factories.replay_agent(tool, slug=factories.fresh("replayer"))
    assert agent.current_version.spec["tools"] == [tool.name]
    run = _run(agent, caller.user, _calculation(tool))
    assert run.status == "succeeded" and "42" in run.output


def test_a_tool_granted_to_no_role_of_the_caller_is_refused(caller):
    tool = factories.tool()
    factories.grant(factories.fresh("other-role"), tool)
    run = _run(factories.replay_agent(tool, slug=factories.fresh("replayer")), caller.user, _calculation(tool))
    call = run.events.get(kind="tool_call").data
    assert call["result"]["code"] == "not_permitted" and "42" not in run.output


def test_an_approval_policy_parks_the_side_effect_until_the_approver_persona_decides(caller, secops):
    tool = factories.tool(side_effect=True)
    factories.grant(factories.CALLER_ROLE, tool)
    factories.policy(type="tool_approval", target_tools=[tool.name], approver_role=factories.APPROVER_ROLE)
    run = _run(factories.replay_agent(tool, slug=factories.fresh("replayer")), caller.user, _calculation(tool))
    assert run.status == "awaiting_approval"
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    services.approval_decide(via="session", approval_id=approval.id, user=secops.user, approve=True,
                             reason="checked")
    services.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.status == "succeeded" and "42" in run.output
    assert ApprovalRequest.objects.get(id=approval.id).decided_by == secops.user


def test_each_persona_is_in_its_role(caller, secops, compliance_officer, governance_admin):
    from core.permissions import is_governance_admin, reads_everything

    assert caller.user.has_perm("runs.add_run") and not reads_everything(caller.user)
    assert secops.user.groups.filter(name=factories.APPROVER_ROLE).exists()
    assert reads_everything(compliance_officer.user) and not is_governance_admin(compliance_officer.user)
    assert is_governance_admin(governance_admin.user) and not governance_admin.user.is_superuser
