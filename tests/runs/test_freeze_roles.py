"""runs.freeze.governance_for_roles: the snapshot of a caller given by name and roles (an eval's
synthetic caller) is the one governance_for makes for a user holding those roles."""

import pytest
from django.contrib.auth.models import User

from runs import freeze

pytestmark = pytest.mark.django_db


def test_a_caller_by_name_and_roles_is_frozen_as_a_user_with_those_roles_is(demo):
    operator = User.objects.get(username="operator")
    _, by_user = freeze.governance_for(agent_slug="crm-assistant", caller=operator)
    roles = by_user["caller"]["roles"]
    _, by_roles = freeze.governance_for_roles(agent_slug="crm-assistant", username="operator", roles=roles)
    assert by_roles == by_user
    _, fewer = freeze.governance_for_roles(agent_slug="crm-assistant", username="someone", roles=[])
    assert fewer["granted_tools"] == [] and fewer["caller"] == {"username": "someone", "roles": []}


def test_an_unknown_agent_has_no_snapshot(demo):
    assert freeze.governance_for_roles(agent_slug="no-such-agent", username="x", roles=["operators"]) == (None, None)
