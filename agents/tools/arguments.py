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

from core.memo import DigestMemo, digest


@lru_cache(maxsize=512)
def _validator(schema_json: str):
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# Small argument sets that passed are remembered per schema, by digest: a call is checked by
# the harness and again at the dispatcher's gate, and runs repeat their calls. Refusals are
# worked out again each time (their error is raised, and an exception is not for raising twice).
KEPT_ARGUMENT_CHARS = 1_000
_passed = DigestMemo(limit=4096)


def validate(arguments, schema) -> None:
    """As jsonschema.validate(arguments, schema)."""
    schema_json = json.dumps(schema, sort_keys=True)
    key = _passed_key(schema_json, arguments)
    if key is not None and _passed.get(key):
        return
    error = exceptions.best_match(_validator(schema_json).iter_errors(arguments))
    if error is not None:
        raise error
    if key is not None:
        _passed.keep(key, True)


def _passed_key(schema_json: str, arguments) -> bytes | None:
    """The digest of (schema, arguments), for small arguments made of JSON's own types only: a
    tuple or an int key would read as a list or a string key once written as JSON."""
    if not _plain_json(arguments):
        return None
    try:
        text = json.dumps(arguments, sort_keys=True)
    except (TypeError, ValueError):
        return None
    return digest(schema_json, text) if len(text) <= KEPT_ARGUMENT_CHARS else None


def _plain_json(value) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and _plain_json(item) for key, item in value.items())
    if kind is list:
        return all(map(_plain_json, value))
    return kind in (str, int, float, bool) or value is None
