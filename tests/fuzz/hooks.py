"""The Schemathesis hooks of the fuzz: the SCHEMATHESIS_HOOKS module of every pass.

Schemathesis loads this file by its path, in its own process, not as part of the tests package:
it finds the rules module beside it through the repository root it puts on the path.
  - `before_call` gives every request a fresh Idempotency-Key: the generator repeats short
    strings, and the same key with another body is a 422 by contract;
  - `filter_failure` drops a positive_data_acceptance failure whose 400 refuses a body that breaks
    the declared schema after all, or names only rules no schema can state (tests/fuzz/rules.py),
    and logs each drop with its reason to the file DROPS_ENV names;
  - `map_case` makes a positive review record obey the rules across its fields (rules.fit_review_record),
    so that records reach the review chain instead of their 400.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from pathlib import Path

import jsonschema
import schemathesis

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.fuzz.rules import DROPS_ENV, REVIEW_RECORDS, fit_review_record, only_business_rules  # noqa: E402

_sent_keys: set[str] = set()
_sent_lock = threading.Lock()


def _fresh(key):
    """The key itself the first time; a schema-valid key never sent before after that."""
    if not isinstance(key, str) or not 1 <= len(key) <= 128:
        return key  # out-of-contract keys stay as generated: their refusal is what is tested
    with _sent_lock:
        if key in _sent_keys:
            key = f"{key[:95]}-{uuid.uuid4().hex}"
        _sent_keys.add(key)
    return key


@schemathesis.hook
def before_call(context, case, kwargs):
    # Keys belong to the user and outlive the request: a key Schemathesis happens to draw
    # twice would turn the second request into a 422 ("used with a different request").
    if case.headers:
        for name in list(case.headers):
            if name.lower() == "idempotency-key":
                case.headers[name] = _fresh(case.headers[name])
    if isinstance(case.body, dict) and "idempotency_key" in case.body:
        case.body["idempotency_key"] = _fresh(case.body["idempotency_key"])


@schemathesis.hook
def map_case(context, case):
    # Negative cases stay as generated: their refusal is what is tested.
    if (case.operation.path == REVIEW_RECORDS and case.meta is not None and not case.meta.generation.mode.is_negative
            and isinstance(case.body, dict)):
        case.body = fit_review_record(dict(case.body))
    return case


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but a 400 refusing data that was not schema-valid after all, or
    that breaks a rule no schema can state."""
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    operation = f"{case.operation.method.upper()} {case.operation.path}"
    problem = _schema_violation(case)
    if problem is not None:
        _note_drop("case_violates_schema", operation, problem)
        return False
    try:
        details = response.json()["error"]["details"]
    except (ValueError, KeyError, TypeError):
        return True
    if only_business_rules(details):
        _note_drop("business_rule", operation, json.dumps(details)[:300])
        return False
    return True


def _note_drop(reason: str, operation: str, detail: str) -> None:
    path = os.environ.get(DROPS_ENV)
    if path:
        with _sent_lock, open(path, "a") as out:
            out.write(json.dumps({"reason": reason, "operation": operation, "detail": detail}) + "\n")


def _schema_violation(case) -> str | None:
    """Why a JSON body reported as schema-valid is not, by the schema itself; None if it is.

    Schemathesis' coverage phase can fall back to a loosened schema when it cannot build a
    value for the whole body, and then sends values that break a `pattern` (a slug "ýß") as
    positive cases. Re-checking the body against the declared schema with jsonschema tells
    those apart from real refusals of valid data, which stay failures.
    """
    raw = case.operation.schema.raw_schema
    operation = raw["paths"][case.operation.path][case.operation.method.lower()]
    body_schema = (operation.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is None or not isinstance(case.body, (dict, list)):
        return None
    document = {**_draft4(body_schema), "components": _draft4(raw.get("components", {}))}
    error = jsonschema.exceptions.best_match(jsonschema.Draft4Validator(document).iter_errors(case.body))
    return None if error is None else f"{'/'.join(map(str, error.absolute_path))}: {error.message}"[:300]


def _draft4(node):
    """OpenAPI 3.0's `nullable` spelled as JSON Schema draft 4 (a null type, a null in an enum)."""
    if isinstance(node, list):
        return [_draft4(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _draft4(value) for key, value in node.items()}
    if node.pop("nullable", False):
        if "type" in node:
            node["type"] = [node["type"], "null"]
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
    return node
