"""A policy's patterns: RE2 only (refused on save saying why, failing closed when stored), linear on the
catastrophic case, and matched through lookalike letters."""

import pytest

from governance.models import Policy
from tests.api.policies import GUARD, evaluate, policy_id

pytestmark = pytest.mark.django_db


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
