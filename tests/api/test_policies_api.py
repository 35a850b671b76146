"""The policy API: CRUD through the services (history written), strict input, roles, the dry run."""

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, ModelProfile
from governance import services
from governance.models import Policy, PolicyVersion
from runs.models import Run

pytestmark = pytest.mark.django_db

GUARD = {
    "name": "no-drops", "type": "intent_guard", "priority": 20,
    "keywords": ["drop", "truncate"], "response": "I can't change the schema.",
}


def policy_id(name: str) -> int:
    return Policy.objects.get(name=name).pk


def names(response) -> list[str]:
    return [p["name"] for p in response.json()["results"]]


# --- reads ------------------------------------------------------------------------------


def test_anyone_with_a_role_lists_the_policies_paginated(operator):
    response = operator.get("/api/v1/policies/")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 5
    guard = next(p for p in body["results"] if p["name"] == "no-compensation-questions")
    assert guard["type"] == "intent_guard"
    assert guard["keywords"] == ["salary", "salaries", "compensation", "payroll"]
    assert guard["version"] == 1 and guard["agents"] == [] and guard["approver_role"] is None


def test_the_list_filters_by_type_enabled_and_agent(admin, demo):
    assert names(admin.get("/api/v1/policies/?type=tool_approval")) == ["side-effects-need-secops"]
    assert names(admin.get("/api/v1/policies/?enabled=false")) == ["executive-summary"]
    other = Agent.objects.create(slug="other", name="Other", instructions="x", model_profile=ModelProfile.objects.first())
    admin.post("/api/v1/policies/", {**GUARD, "agents": ["other"]}, format="json")
    for_crm = names(admin.get("/api/v1/policies/?agent=crm-assistant"))
    for_other = names(admin.get("/api/v1/policies/?agent=other"))
    assert "no-drops" not in for_crm and len(for_crm) == 5
    assert "no-drops" in for_other and len(for_other) == 6
    assert other.policies.count() == 1


def test_an_unknown_filter_value_is_a_400(admin):
    response = admin.get("/api/v1/policies/?type=bogus")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_it_reads_one_policy(compliance):
    response = compliance.get(f"/api/v1/policies/{policy_id('side-effects-need-secops')}/")
    assert response.status_code == 200
    body = response.json()
    assert body["approver_role"] == "secops"
    assert body["target_tools"] == ["send_email", "delete_account"]
    assert body["approval_ttl_seconds"] == 72 * 3600


def test_someone_without_a_role_reads_nothing(outsider, demo):
    for path in ("/api/v1/policies/", f"/api/v1/policies/{policy_id('churn-risk-playbook')}/",
                 f"/api/v1/policies/{policy_id('churn-risk-playbook')}/history/"):
        response = outsider.get(path)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"


def test_an_anonymous_client_is_refused(demo):
    assert APIClient().get("/api/v1/policies/").status_code in (401, 403)


@pytest.mark.parametrize("path", ["/api/v1/policies/999999/", "/api/v1/policies/999999/history/"])
def test_an_unknown_policy_is_a_404(admin, path):
    response = admin.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_patching_or_deleting_an_unknown_policy_is_a_404(admin):
    assert admin.patch("/api/v1/policies/999999/", {"priority": 1}, format="json").status_code == 404
    assert admin.delete("/api/v1/policies/999999/").status_code == 404


# --- writes -----------------------------------------------------------------------------


def test_an_admin_creates_a_policy_at_version_one_with_history(admin):
    response = admin.post("/api/v1/policies/", {**GUARD, "agents": ["crm-assistant"]}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["version"], body["agents"], body["priority"]) == ("no-drops", 1, ["crm-assistant"], 20)
    [row] = PolicyVersion.objects.filter(policy_id=body["id"])
    assert (row.action, row.version, row.changed_by.username, row.old_values) == ("create", 1, "admin", None)
    assert row.new_values["keywords"] == ["drop", "truncate"]


def test_a_tool_approval_names_its_approver_role(admin):
    response = admin.post("/api/v1/policies/", {
        # delete_account, which already waits for a person in every golden case: the gate lets it through
        # (one on the calculator would park the ARR case that must succeed, and is refused).
        "name": "calc-review", "type": "tool_approval", "target_tools": ["delete_account"], "approver_role": "compliance",
    }, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["approver_role"] == "compliance"


def test_patching_writes_history_with_old_and_new_values_and_who(admin):
    pk = policy_id("churn-risk-playbook")
    # Keywords the churn-ranking golden case still fires on ("churning"): the gate lets it through.
    keywords = ["churn", "churning", "at risk", "attrition"]
    response = admin.patch(f"/api/v1/policies/{pk}/", {"priority": 5, "keywords": keywords}, format="json")
    assert response.status_code == 200, response.json()
    assert (response.json()["version"], response.json()["priority"]) == (2, 5)
    row = PolicyVersion.objects.filter(policy_id=pk).order_by("-version").first()
    assert (row.action, row.version, row.changed_by.username) == ("update", 2, "admin")
    assert (row.old_values["priority"], row.new_values["priority"]) == (50, 5)
    assert (row.old_values["keywords"], row.new_values["keywords"]) == (["churn", "churning", "at risk"], keywords)
    assert row.draft is not None and row.eval_run_id == row.draft.gate_eval_run_id  # the gate it passed

    history = admin.get(f"/api/v1/policies/{pk}/history/").json()
    assert history["count"] == 2
    latest, first = history["results"]
    assert (latest["version"], latest["action"], latest["changed_by"]) == (2, "update", "admin")
    assert latest["old_values"]["priority"] == 50 and latest["new_values"]["priority"] == 5
    assert (first["version"], first["action"], first["old_values"]) == (1, "create", None)
    assert {"id", "policy_name", "changed_at"} <= set(latest)


def test_a_patch_that_changes_nothing_writes_no_history(admin):
    pk = policy_id("churn-risk-playbook")
    response = admin.patch(f"/api/v1/policies/{pk}/", {"priority": 50}, format="json")
    assert response.status_code == 200 and response.json()["version"] == 1
    assert PolicyVersion.objects.filter(policy_id=pk).count() == 1


def test_an_admin_deletes_a_policy_and_its_history_stays(admin):
    # The disabled formatter: no golden case needs it (deleting email-etiquette, which the email
    # cases must see fire, is refused by the gate: tests/governance/test_drafts.py).
    pk = policy_id("executive-summary")
    response = admin.delete(f"/api/v1/policies/{pk}/")
    assert response.status_code == 204
    assert not Policy.objects.filter(pk=pk).exists()
    row = PolicyVersion.objects.filter(policy_name="executive-summary", action="delete").get()
    assert (row.version, row.changed_by.username, row.new_values) == (2, "admin", None)
    assert row.old_values["content"].startswith("Executive summary")


@pytest.mark.parametrize("persona", ["operator", "approver", "compliance"])
def test_only_governance_admins_write(persona, request):
    client = request.getfixturevalue(persona)
    pk = policy_id("churn-risk-playbook")
    attempts = [
        client.post("/api/v1/policies/", GUARD, format="json"),
        client.patch(f"/api/v1/policies/{pk}/", {"priority": 1}, format="json"),
        client.delete(f"/api/v1/policies/{pk}/"),
        client.post("/api/v1/policies/evaluate/", {"input": "hello"}, format="json"),
    ]
    for response in attempts:
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"
    assert Policy.objects.get(pk=pk).version == 1
    assert not Policy.objects.filter(name="no-drops").exists()


@pytest.mark.parametrize("values, field", [
    ({**GUARD, "regex": "(unclosed"}, "non_field_errors"),
    ({**GUARD, "type": "firewall"}, "type"),
    ({**GUARD, "match_mode": "most"}, "match_mode"),
    ({"name": "x", "type": "tool_approval", "target_tools": ["send_email"], "approver_role": "nobody"}, "approver_role"),
    ({**GUARD, "agents": ["no-such-agent"]}, "agents"),
    ({**GUARD, "keywords": "drop"}, "keywords"),
    ({"name": "x", "type": "playbook", "keywords": ["a"]}, "non_field_errors"),
])
def test_invalid_policies_are_refused_with_details_and_write_nothing(admin, values, field):
    before = PolicyVersion.objects.count()
    response = admin.post("/api/v1/policies/", values, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["details"]
    assert PolicyVersion.objects.count() == before


def test_a_bad_regex_says_what_is_wrong(admin):
    response = admin.post("/api/v1/policies/", {**GUARD, "regex": "(unclosed"}, format="json")
    assert "invalid regex" in response.json()["error"]["details"]["non_field_errors"][0]


@pytest.mark.parametrize("regex, why", [
    (r"(a)\1", "backreferences"),
    (r"salary(?! band)", "negative lookahead"),
    (r"(?<=net )pay", "lookbehind"),
    (r"(?:[\pL\pN]{500}){1,2}", "too large"),
])
def test_a_regex_re2_cannot_run_is_refused_on_save_saying_why(admin, regex, why):
    response = admin.post("/api/v1/policies/", {**GUARD, "regex": regex}, format="json")
    assert response.status_code == 400, response.json()
    (message,) = response.json()["error"]["details"]["non_field_errors"]
    assert "RE2" in message and why in message
    assert not Policy.objects.filter(name="no-drops").exists()
    pk = policy_id("no-compensation-questions")
    assert admin.patch(f"/api/v1/policies/{pk}/", {"regex": regex}, format="json").status_code == 400
    assert Policy.objects.get(pk=pk).regex == ""


def test_the_catastrophic_pattern_is_accepted_and_answered(admin):
    # ^(a+)+$ stalled the server on Python's re (thirty characters: 19 s). On RE2 it is linear.
    response = admin.post("/api/v1/policies/", {**GUARD, "keywords": [], "regex": r"^(a+)+$"}, format="json")
    assert response.status_code == 201, response.json()
    assert evaluate(admin, input="a" * 10_000 + "!").json()["blocked"] is False
    assert evaluate(admin, input="a" * 10_000).json()["intent_guard"]["policy"] == "no-drops"


def test_a_stored_regex_re2_cannot_run_fails_closed_and_readyz_names_it(admin, client):
    pk = policy_id("churn-risk-playbook")
    Policy.objects.filter(pk=pk).update(regex=r"(churn)\s+\1")  # stored before RE2, or by a DBA
    response = evaluate(admin, agent="crm-assistant", input="List all accounts.")
    assert response.status_code == 422
    assert "backreferences" in response.json()["error"]["details"]["reason"]
    unsound = client.get("/readyz").json()["unsound_policies"]
    assert [(u["policy"], u["id"]) for u in unsound] == [("churn-risk-playbook", pk)]
    assert "RE2" in unsound[0]["problems"][0]


@pytest.mark.django_db(transaction=True)  # the run starts on commit
def test_a_run_meeting_a_stored_regex_re2_cannot_run_fails_closed(operator):
    # Python's re ran this backreference; RE2 cannot, so the policy cannot decide: nothing runs.
    from tests.runs.helpers import start, tools_called

    Policy.objects.filter(name="churn-risk-playbook").update(regex=r"(churn)\s+\1")
    run = start(operator, "List all accounts.")
    assert (run["status"], run["error"]) == ("failed", "policy_error")
    assert run["usage"]["llm_calls"] == 0 and tools_called(run["id"]) == []


def test_a_salary_question_in_lookalike_letters_is_blocked_and_quoted_as_sent(admin):
    disguised = "s\u0430l\u200b\u0430ry"  # Cyrillic a twice, a zero-width space
    response = evaluate(admin, agent="crm-assistant", input=f"What is Dana Whitfield's {disguised}?")
    guard = response.json()["intent_guard"]
    assert (guard["policy"], guard["matched"], guard["quoted"]) == ("no-compensation-questions", ["salary"], [disguised])


def test_a_patch_with_an_invalid_value_changes_nothing(admin):
    pk = policy_id("no-compensation-questions")
    response = admin.patch(f"/api/v1/policies/{pk}/", {"regex": "[a-"}, format="json")
    assert response.status_code == 400
    assert Policy.objects.get(pk=pk).version == 1 and Policy.objects.get(pk=pk).regex == ""


def test_an_unknown_approver_role_on_patch_is_a_400(admin):
    pk = policy_id("side-effects-need-secops")
    response = admin.patch(f"/api/v1/policies/{pk}/", {"approver_role": "ghosts"}, format="json")
    assert response.status_code == 400
    assert "approver_role" in response.json()["error"]["details"]


@pytest.mark.parametrize("extra, message", [
    ({"version": 7}, "This field is read-only."),
    ({"id": 1}, "This field is read-only."),
    ({"history": []}, "This field is read-only."),
    ({"owner": "me"}, "Unknown field."),
])
def test_it_refuses_read_only_and_unknown_fields_instead_of_ignoring_them(admin, extra, message):
    response = admin.post("/api/v1/policies/", {**GUARD, **extra}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {next(iter(extra)): [message]}
    pk = policy_id("churn-risk-playbook")
    response = admin.patch(f"/api/v1/policies/{pk}/", {"priority": 1, **extra}, format="json")
    assert response.status_code == 400
    assert Policy.objects.get(pk=pk).version == 1


def test_a_duplicate_name_is_a_conflict(admin):
    response = admin.post("/api/v1/policies/", {**GUARD, "name": "churn-risk-playbook"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    response = admin.patch(f"/api/v1/policies/{policy_id('email-etiquette')}/", {"name": "churn-risk-playbook"}, format="json")
    assert response.status_code == 409


# --- the dry run ------------------------------------------------------------------------


def evaluate(client, **body):
    return client.post("/api/v1/policies/evaluate/", body, format="json")


def tool(result: dict, name: str) -> dict:
    return next(t for t in result["tools"] if t["name"] == name)


def test_a_salary_question_is_blocked_by_the_intent_guard(admin):
    response = evaluate(admin, agent="crm-assistant", input="What is Dana Whitfield's salary?")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["blocked"] is True
    guard = result["intent_guard"]
    assert (guard["policy"], guard["version"], guard["matched"]) == ("no-compensation-questions", 1, ["salary"])
    assert guard["response"].startswith("I can't help with salary")
    assert result["agent"] == {"slug": "crm-assistant", "version": 1}


def test_deleting_an_account_shows_the_tool_and_needs_secops(admin):
    result = evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="operators").json()
    assert result["blocked"] is False and result["intent_guard"] is None
    assert result["role"] == "operators"
    delete = tool(result, "delete_account")
    assert delete["needs_approval"] is True and delete["side_effect"] is True
    assert delete["approval"]["approver_role"] == "secops"
    assert delete["approval"]["policy"] == "side-effects-need-secops"
    assert delete["approval"]["matched"] == ["delete_account"]
    assert tool(result, "list_accounts")["needs_approval"] is False
    email = tool(result, "send_email")
    assert [g["policy"] for g in email["guides"]] == ["email-etiquette"]
    assert "Customer Success" in email["guides"][0]["content"]
    assert len(result["tools"]) == 9


def test_a_role_without_grants_is_shown_no_tools(admin):
    result = evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="compliance").json()
    assert result["tools"] == []


def test_a_churn_question_fires_the_churn_playbook(admin):
    result = evaluate(admin, agent="crm-assistant", input="Which accounts are most at risk of churning?",
                      role="operators").json()
    assert result["blocked"] is False
    [playbook] = result["playbooks"]
    assert playbook["policy"] == "churn-risk-playbook"
    assert set(playbook["matched"]) == {"churning", "at risk"}
    assert "`list_accounts`" in playbook["content"]
    assert result["output_formatter"] is None  # the executive summary is disabled


def test_an_enabled_output_formatter_is_reported(admin):
    # Through the service, below the gate: over the API the golden set refuses it (list-accounts
    # must not read "Executive summary", tests/governance/test_drafts.py); this is about the dry run.
    services.policy_update(policy=Policy.objects.get(name="executive-summary"), values={"enabled": True})
    result = evaluate(admin, agent="crm-assistant", input="List all accounts.").json()
    assert result["output_formatter"]["policy"] == "executive-summary"
    assert result["output_formatter"]["version"] == 2


def test_without_an_agent_or_role_it_still_answers(admin):
    result = evaluate(admin, input="What is Dana Whitfield's salary?").json()
    assert result["agent"] is None and result["role"] is None
    assert result["intent_guard"]["policy"] == "no-compensation-questions"


@pytest.mark.parametrize("body, field", [
    ({"agent": "nope", "input": "hi"}, "agent"),
    ({"agent": "crm-assistant", "input": "hi", "role": "ghosts"}, "role"),
    ({"agent": "crm-assistant"}, "input"),
    ({"input": "hi", "dry": True}, "dry"),
])
def test_evaluate_refuses_unknown_agents_roles_and_fields(admin, body, field):
    response = admin.post("/api/v1/policies/evaluate/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_a_broken_policy_is_a_422_naming_it(admin):
    Policy.objects.filter(name="churn-risk-playbook").update(regex="(unclosed")  # bypasses the services' checks
    response = evaluate(admin, agent="crm-assistant", input="List all accounts.")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "policy_error"
    assert error["details"]["policy"] == "churn-risk-playbook"
    assert "churn-risk-playbook" in error["message"]


def test_the_dry_run_starts_nothing(admin):
    evaluate(admin, agent="crm-assistant", input="Delete the account Initech.", role="operators")
    assert Run.objects.count() == 0


def test_an_approval_ttl_is_at_most_thirty_days(admin):
    policy_id = admin.get("/api/v1/policies/?type=tool_approval").json()["results"][0]["id"]
    response = admin.patch(f"/api/v1/policies/{policy_id}/", {"approval_ttl_seconds": 30 * 24 * 3600 + 1}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["details"]) == {"approval_ttl_seconds"}
    assert admin.patch(f"/api/v1/policies/{policy_id}/", {"approval_ttl_seconds": 30 * 24 * 3600},
                       format="json").status_code == 200


# --- an approver role with nobody in it ----------------------------------------------------


def _empty_role(name="nobody-home"):
    from django.contrib.auth.models import Group

    return Group.objects.create(name=name)


APPROVAL = {"name": "park-for-nobody", "type": "tool_approval", "target_tools": ["send_email"]}


def test_an_approval_policy_for_a_role_without_members_is_refused_saying_why(admin):
    _empty_role()
    response = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": "nobody-home"}, format="json")
    assert response.status_code == 400, response.content
    assert "has no active members" in response.json()["error"]["details"]["approver_role"][0]
    assert not Policy.objects.filter(name="park-for-nobody").exists()
    # Disabled it parks nothing, so it may be kept; enabling it is refused the same way.
    created = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": "nobody-home", "enabled": False}, format="json")
    assert created.status_code == 201
    enabled = admin.patch(f"/api/v1/policies/{created.json()['id']}/", {"enabled": True}, format="json")
    assert enabled.status_code == 400 and "no active members" in str(enabled.json()["error"]["details"])


def test_an_inactive_member_does_not_count(admin):
    from django.contrib.auth import get_user_model

    role = _empty_role()
    get_user_model().objects.create_user("gone", is_active=False).groups.add(role)
    response = admin.post("/api/v1/policies/", {**APPROVAL, "approver_role": role.name}, format="json")
    assert response.status_code == 400


def test_tools_and_tool_sources_refuse_an_empty_approver_role(admin):
    _empty_role()
    tool = admin.patch("/api/v1/tools/send_email/", {"approver_role": "nobody-home"}, format="json")
    assert tool.status_code == 400 and "no active members" in str(tool.json()["error"]["details"])
    source = admin.post("/api/v1/tool-sources/", {"name": "nobodys", "kind": "openapi", "document": {"openapi": "3.0.0"},
                                                  "approver_role": "nobody-home"}, format="json")
    assert source.status_code == 400 and "no active members" in str(source.json()["error"]["details"])


def test_a_role_that_lost_its_last_member_is_flagged_in_readyz_and_the_workbench(admin, client):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    # Removing the last member is not refused (offboarding must never wait): it is flagged.
    secops = Group.objects.get(name="secops")
    secops.user_set.clear()
    ready = client.get("/readyz").json()
    flagged = {(e["kind"], e["name"]) for e in ready["unstaffed_approver_roles"]}
    assert ("policy", "side-effects-need-secops") in flagged
    assert ("setting", "WARRANT_TAINT_APPROVER_ROLE") in flagged
    client.force_login(get_user_model().objects.get(username="admin"))
    page = client.get("/admin/governance/policy/").content.decode()
    assert "Nobody can decide" in page and "&#x27;secops&#x27;, which has no active members" in page
    queue = client.get("/admin/runs/approvalrequest/queue/").content.decode()
    assert "Nobody can decide" in queue


def test_the_policy_form_refuses_an_empty_approver_role_next_to_the_field(admin, client):
    from django.contrib.auth import get_user_model

    role = _empty_role()
    client.force_login(get_user_model().objects.get(username="admin"))
    answer = client.post("/admin/governance/policy/add/", {
        "name": "park-for-nobody", "type": "tool_approval", "priority": 100, "match_mode": "any", "enabled": "on",
        "target_tools": "send_email", "approver_role": role.pk})
    assert answer.status_code == 200 and "has no active members" in answer.content.decode()
    assert not Policy.objects.filter(name="park-for-nobody").exists()


def test_the_dry_run_says_which_calls_a_run_would_refuse(admin):
    """An input that activates a skill limits the run to the skill's tools: the dry run names each
    tool the gate would refuse and why, as the harness would answer the call."""
    body = admin.post("/api/v1/policies/evaluate/", {"agent": "crm-assistant", "input": "Summarise Globex's tickets."},
                      format="json").json()
    tools = {tool["name"]: tool for tool in body["tools"]}
    assert tools["list_open_tickets"]["refused"] is None
    assert tools["send_email"]["refused"] == {
        "code": "not_permitted", "reason": "'send_email' is outside the active skill's allowed tools"}
    assert tools["send_email"]["needs_approval"] is False
