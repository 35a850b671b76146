"""The role matrix's fixtures, shared by its modules (tests/api/test_role_matrix_*.py)."""

import pytest
from django.contrib.auth import get_user_model

from tests.api.role_matrix_world import World, token_client


@pytest.fixture
def world(demo):
    # The grant row POSTs for matrix-role, so the role must exist whoever asks.
    w = World()
    w.role  # noqa: B018 - created up front: the POST grants/ body names it
    w.trigger_service_account  # noqa: B018 - the POST triggers/ body names it
    return w


@pytest.fixture
def as_persona(demo):
    if not get_user_model().objects.filter(username="outsider").exists():
        get_user_model().objects.create_user("outsider", password="x")
    return lambda persona: token_client(None if persona == "anonymous" else persona)

