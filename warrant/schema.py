"""The OpenAPI schema says everything the server enforces, so clients and fuzzers can rely on it.

- Every operation documents the error answers it can give: whatever the view, routing,
  authentication, throttling and body limits can answer with these statuses, always in the one
  error shape of core.api_errors.
- Request bodies are closed (core.api_fields refuses unknown fields).
- A text field that is trimmed and may not be blank needs a non-space character, not just a
  length of one; a list that refuses repeats says so.
- Query filters refuse an empty value (core.filters), so their strings have a minimum length.

GET schema/ serves the public schema, which depends on the code and the settings alone, not on
who asks: it is built once a process (SchemaBuiltOnce) instead of on every request.
"""

from django.core.signals import setting_changed
from django.core.validators import RegexValidator
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.drainage import set_override
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from core.api_fields import UniqueListField, has_text
from governance.auth import ApiTokenAuthentication

# Warrant's tokens (governance.auth) speak DRF's token scheme: the same "tokenAuth" to clients.
set_override(ApiTokenAuthentication, "suppress_collision_warning", True)

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


# One character that no reader counts as a space: not ECMA-262's \s (the pattern dialect of
# JSON Schema) nor the ones only Python strips (U+001C-U+001F, U+0085).
SOMETHING_BUT_SPACES = r"[^\s\x1c-\x1f\x85]"


class WarrantAutoSchema(AutoSchema):
    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request" and isinstance(field, serializers.CharField) and not field.allow_blank
            and (field.trim_whitespace or has_text in field.validators)
            # A field's own regex becomes its pattern (drf-spectacular adds it after this).
            and not any(isinstance(v, RegexValidator) for v in field.validators)
            and schema.get("type") == "string" and not {"pattern", "enum", "format"} & schema.keys()
        ):
            schema["pattern"] = SOMETHING_BUT_SPACES
        if isinstance(field, UniqueListField):
            schema["uniqueItems"] = True
        return schema


def _filters_need_a_value(result) -> None:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") == "query" and schema.get("type") == "string" and "enum" not in schema:
                    schema.setdefault("minLength", 1)


def document_errors(result, generator, request, public):
    _filters_need_a_value(result)
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in schemas.items():
        # Request bodies are strict (core.api_fields): say so, so clients and fuzzers know.
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


class SchemaBuiltOnce(SchemaGenerator):
    """The generator of GET schema/: the public schema, built once a process for each API version
    and language (about a second of CPU each time otherwise, at any signed-in user's request).
    The view renders the document and never changes it. `manage.py spectacular` builds afresh."""

    built: dict[tuple, dict] = {}

    def get_schema(self, request=None, public=False):
        if not public:  # filtered by the asker's permissions: theirs alone
            return super().get_schema(request=request, public=public)
        key = (self.api_version or getattr(request, "version", None), translation.get_language())
        if key not in self.built:
            self.built[key] = super().get_schema(request=request, public=public)
        return self.built[key]


@receiver(setting_changed)
def _settings_changed(**kwargs) -> None:
    SchemaBuiltOnce.built.clear()  # a test's override_settings may change what the schema says
