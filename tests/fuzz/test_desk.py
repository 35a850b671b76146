"""The fuzz's desk passes (tests/fuzz/run_schemathesis.py) against the role matrix and the schema.

The operator's and the admin's passes meet a refusal on a few operations that some other persona may
call; the desk's passes exist so that those are fuzzed past it. Schemathesis only warns when an
`--include-name-regex` matches nothing, so each row must name exactly one operation of the schema,
and each must be one the persona is allowed.
"""

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from tests.api.role_matrix import MATRIX, PERSONAS
from tests.fuzz.live_server import SESSION_PERSONAS
from tests.fuzz.run_schemathesis import DESK_OPERATIONS, LANES, PEERS
from tests.fuzz.schemathesis_config import _name_pattern, only_pattern

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def operation_names() -> list[str]:
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return [f"{method.upper()} {path}" for path, item in paths.items() for method in METHODS if method in item]


def _allowed(persona: str, row: tuple[str, str]) -> bool:
    return MATRIX[row][PERSONAS.index(persona)] < 300


def _own_tokens(persona: str, row: tuple[str, str]) -> bool:
    """The matrix's cells send a token and read the operator's token; a signed-in persona issues and reads
    its own (tests/api/test_token_auth.py)."""
    return persona in SESSION_PERSONAS and row[1].startswith("tokens/")


@pytest.mark.parametrize("persona", list(DESK_OPERATIONS))
def test_each_desk_row_is_one_operation_of_the_schema_that_the_persona_may_call(persona, operation_names):
    rows = DESK_OPERATIONS[persona]
    matches = {row: [name for name in operation_names if re.search(_name_pattern(*row), name)] for row in rows}
    assert {row: names for row, names in matches.items() if len(names) != 1} == {}
    assert [row for row in rows if not (_allowed(persona, row) or _own_tokens(persona, row))] == []
    # The pass's one filter selects exactly those operations.
    assert sorted(name for name in operation_names if re.search(only_pattern(rows), name)) == sorted(
        names[0] for names in matches.values())


def test_every_operation_the_token_passes_cannot_get_past_is_on_the_desk():
    """Allowed to someone, refused (or invisible) to the operator and the admin: the desk fuzzes it.
    POST tokens/ is refused to every token (a token cannot issue tokens): the session pass issues them."""
    desk = {row for rows in DESK_OPERATIONS.values() for row in rows}
    beyond = {row for row, cells in MATRIX.items() if any(cell < 300 for cell in cells)
              and not _allowed("operator", row) and not _allowed("admin", row)}
    assert beyond - desk == set()
    assert {("POST", "standing-approvals/"), ("POST", "tokens/"), ("POST", "review/items/{item_id}/records/")} <= desk


def test_every_persona_runs_in_one_lane():
    personas = [persona for lane in LANES.values() for persona in lane]
    assert sorted(personas) == sorted(PEERS)
