"""The fuzz's cut of refused operations (tests/fuzz/schemathesis_config.py) against the schema it fuzzes.

Schemathesis only warns when an `[[operations]]` filter matches nothing, and the fuzz still passes:
a pattern that missed would quietly fuzz that operation in full, and one that matched two would cut
an operation the persona may call. So each refused row of the role matrix must name exactly one
operation of the schema the server serves.
"""

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.api.role_matrix import MATRIX, PERSONAS
from tests.fuzz.run_schemathesis import PEERS
from tests.fuzz.schemathesis_config import VALIDATED_FIRST, _name_pattern, few_case_operations

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def operation_names() -> list[str]:
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return [f"{method.upper()} {path}" for path, item in paths.items() for method in METHODS if method in item]


def _refused(persona: str) -> list[tuple[str, str]]:
    return sorted(row for row, statuses in MATRIX.items() if statuses[PERSONAS.index(persona)] == 403)


@pytest.mark.parametrize("persona", list(PEERS))
def test_every_cut_operation_is_one_operation_of_the_schema(persona, operation_names):
    few_cases = few_case_operations(_refused(persona))
    assert few_cases
    matches = {row: [name for name in operation_names if re.search(_name_pattern(*row), name)] for row in few_cases}
    assert {row: names for row, names in matches.items() if len(names) != 1} == {}


def test_a_parameter_named_otherwise_in_the_schema_is_still_found():
    # The URL conf's trust-proposals/<pk>/ is {id} in the schema.
    pattern = _name_pattern("POST", "trust-proposals/{pk}/confirm/")
    assert re.search(pattern, "POST /api/v1/trust-proposals/{id}/confirm/")
    assert not re.search(pattern, "POST /api/v1/trust-proposals/{id}/confirm/again/")
    assert not re.search(_name_pattern("GET", "policies/{policy_id}/"), "GET /api/v1/policies/drafts/")


def test_an_operation_that_validates_before_it_refuses_keeps_every_phase():
    assert VALIDATED_FIRST <= set(_refused("operator"))
    assert not VALIDATED_FIRST & set(few_case_operations(_refused("operator")))
