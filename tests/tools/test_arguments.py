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


def test_long_arguments_are_validated_each_time_without_being_kept():
    text = {"type": "object", "properties": {"body": {"type": "string", "maxLength": 5000}}}
    long = {"body": "x" * (arguments.KEPT_ARGUMENT_CHARS + 10)}
    before = arguments._passes.cache_info().currsize
    arguments.validate(long, text)
    assert arguments._passes.cache_info().currsize == before
    assert "is too long" in _error({"body": "x" * 5001}, text)


def test_a_broken_schema_is_reported_every_time():
    broken = {"type": "object", "properties": {"n": {"type": "no-such-type"}}}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            arguments.validate({"n": 1}, broken)
