"""Tool-call arguments against the tool's JSON Schema, with each schema's validator built once
(the harness checks a call before it runs, the dispatcher again at the gate).

jsonschema.validate checks the schema and builds a validator (and its reference registry) on
every call, which cost more than the rest of a tool step. The answer is the same: the
best-matching ValidationError, or SchemaError for a broken schema (never cached, so raised
again each time).
"""

import json
from functools import lru_cache

from jsonschema import exceptions
from jsonschema.validators import validator_for


@lru_cache(maxsize=512)
def _validator(schema_json: str):
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# Small argument sets that passed are remembered, per schema: a call is checked by the harness
# and again at the dispatcher's gate, and runs repeat their calls. Refusals are worked out again
# each time (their error is raised, and an exception object is not for raising twice).
KEPT_ARGUMENT_CHARS = 1_000


def validate(arguments, schema) -> None:
    """As jsonschema.validate(arguments, schema)."""
    schema_json = json.dumps(schema, sort_keys=True)
    try:
        arguments_json = json.dumps(arguments, sort_keys=True)
    except (TypeError, ValueError):
        arguments_json = None
    if arguments_json is not None and len(arguments_json) <= KEPT_ARGUMENT_CHARS and _passes(schema_json, arguments_json):
        return
    error = exceptions.best_match(_validator(schema_json).iter_errors(arguments))
    if error is not None:
        raise error


@lru_cache(maxsize=4096)
def _passes(schema_json: str, arguments_json: str) -> bool:
    return _validator(schema_json).is_valid(json.loads(arguments_json))
