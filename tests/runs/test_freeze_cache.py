"""A run is governed by what holds when it is asked for, though each process keeps what it froze.

Every test warms the cache, makes one kind of governed change the way an admin, a service or a
bulk query would, and checks that the next run's snapshot shows it and equals a freeze made from
scratch.
"""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, AgentVersion, Tool
from agents.services import agent_publish
from core import access, stamp
from governance.models import Policy, ToolGrant
from governance.services import grant_create, grant_delete, policy_create, policy_delete, policy_update
from runs import freeze
from runs.models import Run
from runs.services import run_start
from skills.models import Skill

AGENT = "crm-assistant"


def _user(username="operator"):
    return get_user_model().objects.get(username=username)


def _forget():
    freeze.clear()
    access.clear()


def _started(user=None) -> dict:
    run, created = run_start(agent_slug=AGENT, input_text="How is Acme doing?", caller=user or _user())
    assert created
    return Run.objects.get(id=run.id).snapshot


def _from_scratch(user=None) -> dict:
    _forget()
    try:
        return freeze.governance_for(agent_slug=AGENT, caller=user or _user())[1]
    finally:
        _forget()


@pytest.fixture
def warm(demo):
    """The operator's governance kept: freezing again reads the stamp and nothing else."""
    _forget()
    operator = _user()
    freeze.governance_for(agent_slug=AGENT, caller=operator)
    with CaptureQueriesContext(connection) as queries:
        freeze.governance_for(agent_slug=AGENT, caller=operator)
    assert [q["sql"] for q in queries] == [f"SELECT stamp FROM {stamp.STAMP_TABLE} WHERE id = 1"]
    yield operator
    _forget()


def _same_as_from_scratch(snapshot: dict, user=None) -> dict:
    assert snapshot == json.loads(json.dumps(_from_scratch(user)))  # as stored: tuples become lists
    return snapshot


def _tables(sql: str) -> set[str]:
    return set(re.findall(r'(?:FROM|JOIN)\s+"?(\w+)"?', sql))


def test_every_table_a_freeze_reads_changes_the_stamp(demo):
    _forget()
    operator = _user()
    with CaptureQueriesContext(connection) as queries:
        freeze.governance_for(agent_slug=AGENT, caller=operator)
    read = set().union(*(_tables(q["sql"]) for q in queries))
    assert read - {stamp.STAMP_TABLE} <= set(stamp.TABLES), read - set(stamp.TABLES)
    assert {"governance_policy", "governance_toolgrant", "skills_skill", "agents_tool", "auth_user_groups"} <= read


def test_every_stamped_table_has_its_trigger(demo):
    if connection.vendor == "sqlite":  # row triggers: an update of no rows fires none, so look them up
        with connection.cursor() as cursor:
            cursor.execute("SELECT tbl_name, count(*) FROM sqlite_master WHERE type = 'trigger' "
                           "AND name LIKE '%governance_changed%' GROUP BY tbl_name")
            assert dict(cursor.fetchall()) == {table: 3 for table in stamp.TABLES}
        return
    for table in stamp.TABLES:
        before = stamp.current()
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET id = id WHERE 1 = 0")  # statement triggers fire anyway
        assert stamp.current() != before, table


def test_a_new_policy_reaches_the_next_run(warm):
    policy_create(values={"name": "no-refunds", "type": "intent_guard", "keywords": ["refund"], "response": "No."})
    snapshot = _same_as_from_scratch(_started())
    assert "no-refunds" in [p["name"] for p in snapshot["policies"]]


def test_an_edited_policy_reaches_the_next_run(warm):
    policy = Policy.objects.get(name="churn-risk-playbook")
    policy_update(policy=policy, values={"content": "Call them first."})
    snapshot = _same_as_from_scratch(_started())
    assert [p["content"] for p in snapshot["policies"] if p["name"] == "churn-risk-playbook"] == ["Call them first."]


def test_a_policy_disabled_by_a_bulk_update_leaves_the_next_run(warm):
    Policy.objects.filter(name="churn-risk-playbook").update(enabled=False)
    snapshot = _same_as_from_scratch(_started())
    assert "churn-risk-playbook" not in [p["name"] for p in snapshot["policies"]]


def test_deleted_policies_leave_the_next_run(warm):
    policy_delete(policy=Policy.objects.get(name="churn-risk-playbook"))
    Policy.objects.filter(name="email-etiquette").delete()
    names = [p["name"] for p in _same_as_from_scratch(_started())["policies"]]
    assert "churn-risk-playbook" not in names and "email-etiquette" not in names


def test_a_policy_scoped_to_another_agent_leaves_the_next_run(warm):
    other = Agent.objects.create(slug="other", name="Other", instructions="x", model_profile=Agent.objects.get(slug=AGENT).model_profile)
    Policy.objects.get(name="churn-risk-playbook").agents.add(other)
    snapshot = _same_as_from_scratch(_started())
    assert "churn-risk-playbook" not in [p["name"] for p in snapshot["policies"]]


def test_grants_given_and_taken_reach_the_next_run(warm):
    operators, secops = Group.objects.get(name="operators"), Group.objects.get(name="secops")
    grant_delete(role=operators, tool=Tool.objects.get(name="calculator"))
    ToolGrant.objects.filter(role=operators, tool__name="search_knowledge").delete()
    granted = _same_as_from_scratch(_started())["granted_tools"]
    assert "calculator" not in granted and "search_knowledge" not in granted
    warm.groups.add(secops)
    grant_create(role=secops, tool=Tool.objects.get(name="calculator"))
    assert "calculator" in _same_as_from_scratch(_started())["granted_tools"]


def test_a_membership_change_reaches_the_next_run(warm):
    secops = Group.objects.get(name="secops")
    warm.groups.add(secops)
    assert "secops" in _same_as_from_scratch(_started(warm), warm)["caller"]["roles"]
    secops.user_set.remove(warm)
    assert "secops" not in _same_as_from_scratch(_started(warm), warm)["caller"]["roles"]


def test_tools_disabled_held_or_reassigned_reach_the_next_run(warm):
    Tool.objects.filter(name="calculator").update(enabled=False)
    tool = Tool.objects.get(name="get_account")
    tool.held = True
    tool.save()
    Tool.objects.filter(name="send_email").update(approver_role=Group.objects.get(name="compliance"))
    snapshot = _same_as_from_scratch(_started())
    assert "calculator" not in snapshot["tools"] and "get_account" not in snapshot["tools"]
    assert snapshot["tools"]["send_email"]["approver_role"] == "compliance"


def test_a_renamed_approver_role_reaches_the_next_run(warm):
    Group.objects.filter(name="secops").update(name="security")
    snapshot = _same_as_from_scratch(_started())
    assert snapshot["taint_approver_role"] == ""  # the configured role is gone
    assert "security" in [p["approver_role"] for p in snapshot["policies"]]


def test_skills_retired_or_edited_reach_the_next_run(warm):
    Skill.objects.filter(name="incident-summary").update(status=Skill.Status.RETIRED)
    Skill.objects.filter(name="churn-risk-playbook").update(body="A new procedure.")
    skills = {s["name"]: s for s in _same_as_from_scratch(_started())["skills"]}
    assert "incident-summary" not in skills and skills["churn-risk-playbook"]["body"] == "A new procedure."


def test_a_new_agent_version_reaches_the_next_run(warm):
    agent = Agent.objects.get(slug=AGENT)
    agent.instructions = "Be brief."
    agent.save()
    version, published = agent_publish(agent=agent)
    assert published
    snapshot = _same_as_from_scratch(_started())
    assert (snapshot["agent"]["version"], snapshot["agent"]["instructions"]) == (version.version, "Be brief.")
    assert Run.objects.latest("created_at").agent_version == version


def test_an_agent_without_a_version_is_refused_once_kept(warm):
    Agent.objects.create(slug="draft-only", name="Draft", instructions="x", model_profile=Agent.objects.get(slug=AGENT).model_profile)
    part, snapshot = freeze.governance_for(agent_slug="draft-only", caller=warm)
    assert part is not None and snapshot is None
    AgentVersion.objects.create(agent=part.agent, version=1, spec=freeze.governance_for(agent_slug=AGENT, caller=warm)[1]["agent"])
    assert freeze.governance_for(agent_slug="draft-only", caller=warm)[1] is not None


def test_a_permission_taken_from_the_role_refuses_the_next_request(warm, operator):
    body = {"agent": AGENT, "input": "How is Acme doing?"}
    assert operator.post("/api/v1/runs/", body).status_code == 201
    add_run = Permission.objects.get(content_type__app_label="runs", codename="add_run")
    Group.objects.get(name="operators").permissions.remove(add_run)
    assert operator.post("/api/v1/runs/", body).status_code == 403
    warm.user_permissions.add(add_run)
    assert operator.post("/api/v1/runs/", body).status_code == 201


def test_a_deactivated_user_is_refused_though_their_access_is_kept(warm, operator):
    body = {"agent": AGENT, "input": "How is Acme doing?"}
    assert operator.post("/api/v1/runs/", body).status_code == 201
    get_user_model().objects.filter(pk=warm.pk).update(is_active=False)
    warm.refresh_from_db()
    operator.force_authenticate(warm)
    assert operator.post("/api/v1/runs/", body).status_code == 403


def test_nothing_is_kept_when_a_change_commits_while_it_is_read(warm, monkeypatch):
    """The stamp read after loading differs from the one before: what was read is used once, not kept."""
    Policy.objects.filter(name="churn-risk-playbook").update(priority=7)
    stamps = [stamp.current(), "changed-meanwhile"]
    monkeypatch.setattr(stamp, "current", lambda conn=None: stamps.pop(0) if len(stamps) > 1 else stamps[0])
    freeze.governance_for(agent_slug=AGENT, caller=warm)
    monkeypatch.undo()
    with CaptureQueriesContext(connection) as queries:
        freeze.governance_for(agent_slug=AGENT, caller=warm)
    assert any("governance_policy" in q["sql"] for q in queries)  # read again: nothing was kept


def test_a_run_started_with_nothing_changed_reads_only_the_token_and_writes_the_run(warm):
    from rest_framework.test import APIClient

    from governance.tokens import token_issue

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_issue(user=warm, via='command', issued_by='test')[1]}")
    body = {"agent": AGENT, "input": "How is Acme doing?"}
    assert client.post("/api/v1/runs/", body).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert client.post("/api/v1/runs/", body).status_code == 201
    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    # The token with its user and the governance stamp, then straight to the run and its first event.
    # (The tests run tasks in-process, so the answer is read back after them.)
    first = statements[0]
    assert first.startswith("SELECT") and all(table in first for table in ('"governance_apitoken"', '"auth_user"', stamp.STAMP_TABLE))
    assert [s.split()[:3] for s in statements[1:3]] == [["INSERT", "INTO", '"runs_run"'], ["INSERT", "INTO", '"runs_runevent"']]
