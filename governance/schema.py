"""OpenAPI post-processing: every operation documents the error answers it can give.

Whatever the view, routing, authentication, throttling and body limits can answer with these
statuses, always in the one error shape of governance.api_errors.
"""

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "additionalProperties": True},
            },
        }
    },
}

ERRORS = {
    "400": "The request is not valid; `details` names each problem.",
    "401": "Not authenticated.",
    "403": "Authenticated, but your roles may not do this.",
    "404": "Not found, or not yours to see.",
    "405": "This method is not allowed here.",
    "406": "No representation in the requested format.",
    "409": "Conflicts with the current state (already decided, already ended, a twin request in flight).",
    "413": "The request body is too large.",
    "415": "Unsupported media type.",
    "422": "Understood but refused (an idempotency key reused with another body, a broken policy).",
    "429": "Throttled; retry after the `Retry-After` header.",
    "503": "The database or broker is unavailable; retry after the `Retry-After` header.",
}


def document_errors(result, generator, request, public):
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in schemas.items():
        # Request bodies are strict (governance.api_fields): say so, so clients and fuzzers know.
        if name.endswith("Request") and schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
    schemas["ErrorResponse"] = ERROR_SCHEMA
    reference = {"$ref": "#/components/schemas/ErrorResponse"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERRORS.items():
                responses.setdefault(status, {"description": description,
                                              "content": {"application/json": {"schema": reference}}})
    return result
