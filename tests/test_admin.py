"""The admin: every model is there, receipts are read-only for everyone, edits go through services."""

import json

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse

from governance import services
from governance.models import Policy, PolicyVersion
from runs.models import Receipt
from skills.models import Skill
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db


def test_every_registered_model_has_a_working_changelist(admin_client):
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        assert admin_client.get(url).status_code == 200, url


def test_receipts_are_read_only_even_for_a_superuser(admin_client, operator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        start(operator, "List all accounts.")
    receipt = Receipt.objects.get()
    model_admin = admin.site._registry[Receipt]
    request = type("R", (), {"user": get_user_model().objects.get(username="admin")})()
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, receipt)
    assert not model_admin.has_delete_permission(request, receipt)
    delete_url = reverse("admin:runs_receipt_delete", args=[receipt.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert Receipt.objects.filter(pk=receipt.pk).exists()


def _post_policy(client, policy: Policy, **changes):
    """The demo policy's admin change form, posted with its values but for `changes`."""
    form = {"name": policy.name, "type": policy.type, "description": "", "enabled": "on", "priority": 50,
            "keywords": '["churn"]', "match_mode": "any", "regex": "", "target_tools": "[]",
            "content": policy.content, "response": "", "expected_version": policy.version}
    return client.post(reverse("admin:governance_policy_change", args=[policy.pk]), form | changes)


def test_a_policy_with_a_bad_regex_is_refused_with_a_clear_message(admin_client):
    policy = Policy.objects.get(name="churn-risk-playbook")
    response = _post_policy(admin_client, policy, regex="(unclosed")
    assert response.status_code == 200
    assert "invalid regex" in response.content.decode()
    assert Policy.objects.get(pk=policy.pk).regex == ""


def test_a_policy_edited_in_the_admin_writes_history(admin_client):
    policy = Policy.objects.get(name="churn-risk-playbook")
    response = _post_policy(admin_client, policy, priority=40, keywords='["churn", "churning"]')
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = PolicyVersion.objects.filter(policy=policy).order_by("-version").first()
    assert (entry.version, entry.action, entry.changed_by.username) == (2, "update", "admin")
    assert entry.old_values["priority"] == 50 and entry.new_values["priority"] == 40


def _edit(policy, **changes) -> dict:
    """The policy's form as its editor would post it: its own values (so its golden set still
    passes, as a policy write must), with `changes`."""
    return {"name": policy.name, "type": policy.type, "description": policy.description, "enabled": "on",
            "priority": policy.priority, "keywords": json.dumps(policy.keywords), "match_mode": policy.match_mode,
            "regex": policy.regex, "target_tools": json.dumps(policy.target_tools), "content": policy.content,
            "response": policy.response, "quorum": policy.quorum, "expected_version": policy.version} | changes


def test_a_policy_edit_on_top_of_a_newer_version_is_refused_and_saves_nothing(admin_client):
    policy = Policy.objects.get(name="churn-risk-playbook")
    url = reverse("admin:governance_policy_change", args=[policy.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="expected_version" value="1"' in page  # the version the editor opened travels with the form
    # Someone else saves first (through the API's service), then the first editor saves what they saw.
    other = get_user_model().objects.create_user("admin2", password="x", is_staff=True)
    services.policy_update(policy=policy, values={"priority": 7}, user=other)
    response = admin_client.post(url, _edit(policy, priority=40, expected_version=1))
    assert response.status_code == 200
    text = response.content.decode()
    assert "changed by admin2 while you were editing it" in text and "now version 2" in text
    policy.refresh_from_db()
    assert (policy.priority, policy.version) == (7, 2)  # the other edit stands, nothing overwritten
    assert PolicyVersion.objects.filter(policy=policy).count() == 2  # create + the other edit only
    # Reopened, the editor's change lands on top of version 2.
    response = admin_client.post(url, _edit(policy, priority=40, expected_version=2))
    assert response.status_code == 302, response.content.decode()[:2000]
    policy.refresh_from_db()
    assert (policy.priority, policy.version) == (40, 3)


def test_a_policy_edit_without_the_version_it_started_from_is_refused(admin_client):
    policy = Policy.objects.get(name="churn-risk-playbook")
    url = reverse("admin:governance_policy_change", args=[policy.pk])
    response = admin_client.post(url, {k: v for k, v in _edit(policy, priority=40).items() if k != "expected_version"})
    assert response.status_code == 200 and Policy.objects.get(pk=policy.pk).priority == 50


def test_a_malformed_skill_md_is_refused_in_the_admin(admin_client):
    skill = Skill.objects.get(name="incident-summary")
    url = reverse("admin:skills_skill_change", args=[skill.pk])
    response = admin_client.post(url, {"source": "no front matter here", "status": "approved"})
    assert response.status_code == 200 and "front matter" in response.content.decode()
    assert Skill.objects.get(pk=skill.pk).version == 1
