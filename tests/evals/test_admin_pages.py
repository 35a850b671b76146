"""The workbench's pages for golden cases and eval runs."""

import pytest

from evals.demo import golden_load
from evals.models import EvalRun, GoldenCase
from evals.runner import run_evals

pytestmark = pytest.mark.django_db


def test_a_case_is_added_in_the_workbench_and_a_run_read_there(admin_client, demo):
    golden_load()
    assert admin_client.get("/admin/evals/goldencase/add/").status_code == 200
    agent_id = GoldenCase.objects.first().agent_id
    response = admin_client.post("/admin/evals/goldencase/add/", {
        "agent": agent_id, "name": "from-the-workbench", "input": "List all accounts.", "roles": '["operators"]',
        "decision": "", "expected_status": "succeeded", "awaiting_tool": "send_email", "tools_called": '["list_accounts"]',
        "tools_not_called": "[]", "output_contains": "[]", "output_excludes": "[]", "policies_fired": "[]",
        "enabled": "on"})
    assert response.status_code == 200 and b"only for expected status awaiting_approval" in response.content
    assert not GoldenCase.objects.filter(name="from-the-workbench").exists()
    eval_run = run_evals(agent_slug="crm-assistant")
    page = admin_client.get(f"/admin/evals/evalrun/{eval_run.pk}/change/")
    assert page.status_code == 200 and b"delete-initech-parks" in page.content
    assert admin_client.get("/admin/evals/evalrun/add/").status_code == 403
    assert EvalRun.objects.count() == 1


def test_the_workbench_runs_the_golden_set_of_the_selected_cases_agents(admin_client, demo):
    golden_load()
    case = GoldenCase.objects.get(name="salary-blocked")
    response = admin_client.post("/admin/evals/goldencase/", {
        "action": "run_golden_sets", "_selected_action": [case.pk]}, follow=True)
    eval_run = EvalRun.objects.get()
    assert (eval_run.agent.slug, eval_run.total, eval_run.status) == ("crm-assistant", 20, "passed")
    assert f"/admin/evals/evalrun/{eval_run.pk}/change/".encode() in response.content
    assert b"20 of 20 cases passed" in response.content
