"""Creating and deleting a role: one set of rules (governance.roles) for the API and the workbench."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from core.api_errors import Conflict, DomainError
from governance.roles import role_create, role_delete

pytestmark = pytest.mark.django_db


def _workbench() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_a_second_role_with_the_same_name_is_a_conflict(demo):
    role_create(name="auditors")
    with pytest.raises(Conflict, match="already exists"):
        role_create(name="auditors")
    assert Group.objects.filter(name="auditors").count() == 1


@pytest.mark.parametrize(("name", "why"), [("governance-admins", "governance admin role"),
                                           ("secops", "approves for policies")])
def test_the_service_refuses_to_delete_a_role_that_must_stay(demo, name, why):
    with pytest.raises(Conflict, match=why):
        role_delete(role=Group.objects.get(name=name))
    assert Group.objects.filter(name=name).exists()


@pytest.mark.parametrize(("name", "why"), [("governance-admins", "governance admin role"),
                                           ("secops", "approves for policies")])
def test_the_workbench_refuses_to_delete_a_role_that_must_stay(demo, name, why):
    role = Group.objects.get(name=name)
    url = f"/admin/governance/role/{role.pk}/delete/"
    client = _workbench()
    response = client.post(url, {"post": "yes"}, follow=True)
    assert response.redirect_chain[0][0] == f"/admin/governance/role/{role.pk}/change/"
    assert why in response.content.decode()
    assert Group.objects.filter(name=name).exists()
    assert "delete_selected" not in client.get("/admin/governance/role/").content.decode()


def test_the_workbench_deletes_a_role_nothing_needs(demo):
    role = Group.objects.create(name="interns")
    response = _workbench().post(f"/admin/governance/role/{role.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Group.objects.filter(name="interns").exists()


def test_a_role_name_outside_the_rule_is_refused_by_the_service_and_the_workbench(demo):
    with pytest.raises(DomainError, match="single spaces"):
        role_create(name="two  spaces")
    no_grants = {"tool_grants-TOTAL_FORMS": "0", "tool_grants-INITIAL_FORMS": "0"}
    response = _workbench().post("/admin/governance/role/add/", {"name": "semi;colon"} | no_grants)
    assert response.status_code == 200 and "single spaces" in response.content.decode()
    assert not Group.objects.filter(name__in=["two  spaces", "semi;colon"]).exists()
    assert _workbench().post("/admin/governance/role/add/", {"name": "night shift"} | no_grants).status_code == 302
    assert Group.objects.filter(name="night shift").exists()


def test_roles_have_one_admin_page_so_no_delete_passes_around_the_rules(demo):
    client = _workbench()
    assert client.get("/admin/auth/group/").status_code == 404
    assert client.get("/admin/governance/role/").status_code == 200
