"""JSON request bodies with bounded nesting.

Python's json module recurses once per level of nesting: a body of a thousand `[` raises
RecursionError, which no caller expects (a 500), and a body just under that limit still makes
every later walk over the value (serializers, canonical JSON, digests) recurse as deep. No
request Warrant takes nests anywhere near MAX_DEPTH levels.
"""

import json

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64


def depth_problem(value, limit: int = MAX_DEPTH) -> str | None:
    """Why `value` (decoded JSON) nests too deep, or None. Walks without recursing."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return f"JSON nested deeper than {limit} levels"
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return None


def loads_bounded(text: str | bytes, limit: int = MAX_DEPTH, **kwargs):
    """json.loads, refusing what nests deeper than `limit` with ValueError (as for bad JSON)."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {limit} levels") from None
    problem = depth_problem(value, limit)
    if problem:
        raise ValueError(problem)
    return value


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser (strict: no NaN or Infinity), with the nesting bounded. Every refusal
    is a ParseError, which the API answers as a 400 in its one error shape."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            value = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from None
        problem = depth_problem(value)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return value
