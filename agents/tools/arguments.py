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


def validate(arguments, schema) -> None:
    """As jsonschema.validate(arguments, schema)."""
    error = exceptions.best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(arguments))
    if error is not None:
        raise error
