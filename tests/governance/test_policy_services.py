"""Policy writes: every change is a PolicyVersion row; invalid values write nothing."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils import timezone

from governance.models import Policy, PolicyVersion
from governance.selectors import policy_values
from core.api_errors import NotFound
from governance.services import policy_create, policy_delete, policy_update

pytestmark = pytest.mark.django_db

GUARD = {
    "name": "no-drops", "type": "intent_guard", "priority": 20,
    "keywords": ["drop", "truncate"], "response": "I can't change the schema.",
}
APPROVAL = {
    "name": "mail-review", "type": "tool_approval", "target_tools": ["send_email"],
    "approver_role": "secops", "agents": ["crm-assistant"],
}


@pytest.fixture
def admin(demo, django_user_model):
    return django_user_model.objects.get(username="admin")


@pytest.fixture
def approver_user(demo, django_user_model):
    return django_user_model.objects.get(username="approver")


def counts():
    return Policy.objects.count(), PolicyVersion.objects.count()


def history(policy_name):
    return list(PolicyVersion.objects.filter(policy_name=policy_name).order_by("id"))


def test_creating_a_policy_writes_version_one_with_who_when_and_the_values(admin):
    before = timezone.now()
    policy = policy_create(values=APPROVAL, user=admin)
    policy.refresh_from_db()
    assert policy.version == 1
    assert policy.approver_role == Group.objects.get(name="secops")
    assert [a.slug for a in policy.agents.all()] == ["crm-assistant"]
    [row] = history("mail-review")
    assert (row.policy, row.version, row.action, row.changed_by) == (policy, 1, "create", admin)
    assert before <= row.changed_at <= timezone.now()
    assert row.old_values is None
    assert row.new_values == policy_values(policy)
    assert row.new_values["approver_role"] == "secops"
    assert row.new_values["agents"] == ["crm-assistant"]
    assert row.new_values["target_tools"] == ["send_email"]


def test_updating_a_policy_bumps_the_version_and_records_old_and_new_values(admin, approver_user):
    policy = policy_create(values=GUARD, user=admin)
    updated = policy_update(policy=policy, values={"keywords": ["drop"], "priority": 5}, user=approver_user)
    assert updated.version == 2
    policy.refresh_from_db()
    assert (policy.version, policy.keywords, policy.priority) == (2, ["drop"], 5)
    created, changed = history("no-drops")
    assert (changed.action, changed.version, changed.changed_by) == ("update", 2, approver_user)
    assert changed.old_values == created.new_values
    assert (changed.old_values["keywords"], changed.old_values["priority"]) == (["drop", "truncate"], 20)
    assert (changed.new_values["keywords"], changed.new_values["priority"]) == (["drop"], 5)
    assert changed.new_values == policy_values(policy)

    policy_update(policy=policy, values={"enabled": False}, user=admin)
    assert [r.version for r in history("no-drops")] == [1, 2, 3]
    assert history("no-drops")[-1].new_values["enabled"] is False


def test_changing_only_the_agents_or_the_approver_is_a_change(admin):
    policy = policy_create(values=APPROVAL, user=admin)
    policy = policy_update(policy=policy, values={"agents": []}, user=admin)
    assert policy.version == 2
    assert policy.agents.count() == 0
    row = history("mail-review")[-1]
    assert (row.old_values["agents"], row.new_values["agents"]) == (["crm-assistant"], [])
    policy = policy_update(policy=policy, values={"approver_role": "compliance"}, user=admin)
    assert policy.version == 3
    row = history("mail-review")[-1]
    assert (row.old_values["approver_role"], row.new_values["approver_role"]) == ("secops", "compliance")


@pytest.mark.parametrize(
    "values",
    [{}, APPROVAL, {"approver_role": "secops", "agents": ["crm-assistant"], "target_tools": ["send_email"]}],
)
def test_an_update_that_changes_nothing_writes_nothing(admin, values):
    policy = policy_create(values=APPROVAL, user=admin)
    stamp = Policy.objects.get(pk=policy.pk).updated_at
    before = counts()
    result = policy_update(policy=policy, values=values, user=admin)
    assert result.version == 1
    assert counts() == before
    fresh = Policy.objects.get(pk=policy.pk)
    assert (fresh.version, fresh.updated_at) == (1, stamp)


def test_deleting_a_policy_keeps_its_history_with_who_and_what_was_lost(admin, approver_user):
    policy = policy_create(values=GUARD, user=admin)
    policy = policy_update(policy=policy, values={"priority": 1}, user=admin)
    last = policy_values(policy)
    policy_delete(policy=policy, user=approver_user)
    assert not Policy.objects.filter(name="no-drops").exists()
    rows = history("no-drops")
    assert [(r.action, r.version) for r in rows] == [("create", 1), ("update", 2), ("delete", 3)]
    gone = rows[-1]
    assert (gone.changed_by, gone.old_values, gone.new_values) == (approver_user, last, None)
    assert all(r.policy is None for r in rows)



def test_a_second_delete_of_the_same_policy_is_not_found_and_writes_no_history(admin):
    # Two requests each loaded the policy before either deleted it: the later one must not
    # answer as if it had deleted something, nor record a second deletion.
    first = policy_create(values=GUARD, user=admin)
    stale = Policy.objects.get(pk=first.pk)
    policy_delete(policy=first, user=admin)
    with pytest.raises(NotFound):
        policy_delete(policy=stale, user=admin)
    assert [(r.action, r.version) for r in history("no-drops")] == [("create", 1), ("delete", 2)]

INVALID = [
    pytest.param({**GUARD, "type": "mystery"}, id="unknown type"),
    pytest.param({**GUARD, "regex": r"([unclosed"}, id="bad regex"),
    pytest.param({k: v for k, v in APPROVAL.items() if k != "approver_role"}, id="approval without approver"),
    pytest.param({**APPROVAL, "approver_role": None}, id="approval with a null approver"),
    pytest.param({**APPROVAL, "approver_role": "nobody"}, id="unknown approver role"),
    pytest.param(
        {"name": "fmt", "type": "output_formatter", "content": "Summary: {ANSWER}"}, id="formatter without answer"
    ),
    pytest.param({**GUARD, "agents": ["crm-assistant", "no-such-agent"]}, id="unknown agent"),
    pytest.param({**GUARD, "keywords": "drop"}, id="keywords not a list"),
    pytest.param({**GUARD, "match_mode": "most"}, id="bad match mode"),
    pytest.param({**GUARD, "response": ""}, id="guard without response"),
]


@pytest.mark.parametrize("values", INVALID)
def test_creating_with_invalid_values_raises_and_writes_nothing(demo, values):
    before = counts()
    with pytest.raises(ValidationError):
        policy_create(values=values)
    assert counts() == before
    assert not Policy.objects.filter(name=values["name"]).exists()
    assert not PolicyVersion.objects.filter(policy_name=values["name"]).exists()


def test_creating_with_a_name_already_taken_raises_and_writes_nothing(demo):
    before = counts()
    with pytest.raises(ValidationError):
        policy_create(values={**GUARD, "name": "no-compensation-questions"})
    assert counts() == before


FORMATTER = {"name": "exec", "type": "output_formatter", "content": "Summary:\n{answer}"}


@pytest.mark.parametrize(
    ("base", "change"),
    [
        pytest.param(GUARD, {"type": "mystery"}, id="unknown type"),
        pytest.param(GUARD, {"regex": r"([unclosed"}, id="bad regex"),
        pytest.param(APPROVAL, {"approver_role": None}, id="approval losing its approver"),
        pytest.param(
            GUARD, {"type": "tool_approval", "target_tools": ["send_email"]}, id="becoming an approval without approver"
        ),
        pytest.param(APPROVAL, {"approver_role": "nobody"}, id="unknown approver role"),
        pytest.param(FORMATTER, {"content": "Summary without the placeholder"}, id="formatter without answer"),
        pytest.param(APPROVAL, {"agents": ["no-such-agent"]}, id="unknown agent"),
        pytest.param(GUARD, {"keywords": "drop"}, id="keywords not a list"),
        pytest.param(GUARD, {"name": "no-compensation-questions"}, id="name already taken"),
    ],
)
def test_updating_with_invalid_values_raises_and_leaves_the_policy_as_it_was(admin, base, change):
    policy = policy_create(values=base, user=admin)
    saved = policy_values(Policy.objects.get(pk=policy.pk))
    before = counts()
    with pytest.raises(ValidationError):
        policy_update(policy=policy, values=change, user=admin)
    assert counts() == before
    fresh = Policy.objects.get(pk=policy.pk)
    assert fresh.version == 1
    assert policy_values(fresh) == saved


@pytest.mark.parametrize("field", ["keywords", "target_tools"])
def test_a_non_list_keywords_or_tools_value_is_a_validation_error(demo, field):
    before = counts()
    with pytest.raises(ValidationError):
        policy_create(values={**APPROVAL, field: 5})
    assert counts() == before
