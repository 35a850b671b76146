"""Tool-call arguments against the tool's schema: the answers of jsonschema.validate, whatever was
checked before (agents.tools.arguments remembers argument sets that passed)."""

import jsonschema
import pytest

from agents.tools import arguments

SCHEMA = {"type": "object", "properties": {"account_id": {"type": "string", "pattern": "^A-\\d+$"}},
          "required": ["account_id"], "additionalProperties": False}


def _error(args, schema=SCHEMA) -> str:
    with pytest.raises(jsonschema.ValidationError) as raised:
        arguments.validate(args, schema)
    return raised.value.message


def test_a_refusal_is_the_same_refusal_every_time():
    arguments.validate({"account_id": "A-100"}, SCHEMA)
    for _ in range(3):  # refusals are never remembered as passes
        assert _error({"account_id": "B-1"}) == "'B-1' does not match '^A-\\\\d+$'"
        assert "'account_id' is a required property" == _error({})


def test_what_passed_one_schema_is_checked_again_under_another():
    args = {"account_id": "A-100"}
    arguments.validate(args, SCHEMA)
    stricter = {**SCHEMA, "properties": {"account_id": {"type": "string", "maxLength": 3}}}
    assert "is too long" in _error(args, stricter)
    arguments.validate(args, SCHEMA)  # and the first schema still lets it through


def test_values_that_only_look_alike_are_not_confused():
    number = {"type": "object", "properties": {"n": {"type": "integer"}}}
    arguments.validate({"n": 1}, number)
    assert "is not of type 'integer'" in _error({"n": 1.5}, number)
    assert "is not of type 'integer'" in _error({"n": True}, number)
    assert "is not of type 'integer'" in _error({"n": "1"}, number)


def test_python_values_json_would_blur_are_checked_as_they_are():
    # Written as JSON, a tuple is a list and an int key a string: neither may pass on that account.
    listed = {"type": "object", "properties": {"ids": {"type": "array"}}}
    arguments.validate({"ids": [1]}, listed)
    assert "is not of type 'array'" in _error({"ids": (1,)}, listed)
    keyed = {"type": "object", "required": ["1"]}
    arguments.validate({"1": "x"}, keyed)
    assert "'1' is a required property" in _error({1: "x"}, keyed)


def test_long_arguments_are_validated_each_time_without_being_kept():
    text = {"type": "object", "properties": {"body": {"type": "string", "maxLength": 5000}}}
    long = {"body": "x" * (arguments.KEPT_ARGUMENT_CHARS + 10)}
    before = len(arguments._passed)
    arguments.validate(long, text)
    assert len(arguments._passed) == before
    assert "is too long" in _error({"body": "x" * 5001}, text)


def test_what_is_kept_is_a_digest_not_the_arguments():
    secret = {"account_id": "A-4111111111111111"}
    arguments.validate(secret, SCHEMA)
    assert all(type(key) is bytes and b"4111" not in key for key in arguments._passed._answers)


def test_a_broken_schema_is_reported_every_time():
    broken = {"type": "object", "properties": {"n": {"type": "no-such-type"}}}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            arguments.validate({"n": 1}, broken)
