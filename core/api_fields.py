"""Input serializers that refuse what they do not accept: no mass assignment, and no silence.

DRF drops unknown keys, so a client sending `status` or `version` would believe it had set
them. A strict serializer answers 400 and names every refused field instead. It also holds a
value to the type, length and pattern the schema states for it, as sent: DRF checks text after
trimming its spaces, so " admin" or a 151st character that is a space would pass a check the
schema says it fails.
"""

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator, URLValidator
from rest_framework import serializers


class StrictFieldsMixin:
    # Fields the resource has but no client may write; anything else not declared is unknown.
    read_only_names: frozenset[str] = frozenset({"id", "version", "history", "sha256", "created_at", "updated_at"})
    # A better message for particular refused names, e.g. a key sent where its variable is wanted.
    hints: dict[str, str] = {}

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            refused = {key: [self._refusal(key)] for key in data if key not in writable}
            refused |= {key: problem if isinstance(problem, dict) else [problem] for key in data
                        if key in writable and (problem := _problem(self.fields[key], data[key]))}
            if refused:
                raise serializers.ValidationError(refused)
        return super().to_internal_value(data)

    def _refusal(self, key: str) -> str:
        if key in self.hints:
            return self.hints[key]
        return "This field is read-only." if key in self.read_only_names or key in self.fields else "Unknown field."


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    pass


def _problem(field, value) -> str | dict | None:
    """What is wrong with the value, or for a list {index: [what]} as DRF reports its items."""
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        problems = {index: problem if isinstance(problem, dict) else [problem]
                    for index, item in enumerate(value) if (problem := _problem(field.child, item))}
        return problems or None
    return _wrong_type(field, value) or _not_as_stated(field, value)


def _wrong_type(field, value) -> str | None:
    """DRF coerces: 4.5 becomes "4.5", 0 becomes false, "12" becomes 12. A strict API takes the
    JSON type the schema declares."""
    if value is None:
        return None
    if isinstance(field, serializers.CharField) and not isinstance(value, str):
        return "Not a valid string."
    if isinstance(field, serializers.RelatedField) and value == "":
        return "Name one, or send null for none."  # DRF would read "" as null
    if isinstance(field, serializers.SlugRelatedField) and not isinstance(value, str):
        return "Not a valid name."  # DRF would look 0 up as "0"
    if isinstance(field, serializers.BooleanField) and not isinstance(value, bool):
        return "Must be true or false."
    if isinstance(field, serializers.IntegerField) and (isinstance(value, bool) or not isinstance(value, int)):
        return "Must be a whole number."
    if isinstance(field, (serializers.FloatField, serializers.DecimalField)) and (
        isinstance(value, bool) or not isinstance(value, (int, float))
    ):
        return "Must be a number."
    return None


def _not_as_stated(field, value) -> str | None:
    """The schema's maxLength and pattern hold for the text as sent, not as DRF trims it."""
    if not isinstance(field, serializers.CharField) or not isinstance(value, str):
        return None
    if value == "" and field.allow_blank:
        return None  # the schema allows "" beside the pattern
    if not value.strip() and not field.allow_blank:
        return None  # DRF's own answer: "This field may not be blank."
    if field.max_length is not None and len(value) > field.max_length:
        return field.error_messages["max_length"].format(max_length=field.max_length)
    for validator in field.validators:
        # Anchored patterns (tests/api/test_schema_patterns.py): a whole match is what ECMA-262
        # reads, where Python's `$` would also let a trailing newline through.
        # (URLValidator, a RegexValidator, also accepts what its punycode fallback turns valid.)
        if isinstance(validator, RegexValidator) and not isinstance(validator, URLValidator) \
                and not validator.inverse_match and validator.regex.fullmatch(value) is None:
            return _message_of(validator, value)
    return None


def _message_of(validator, value) -> str:
    """The validator's own words for the value (some name the rule it broke), else its message."""
    try:
        validator(value)
    except DjangoValidationError as exc:
        return exc.messages[0]
    except serializers.ValidationError as exc:
        return str(exc.detail[0] if isinstance(exc.detail, list) else exc.detail)
    return str(validator.message)


def has_text(value: str) -> None:
    """For text kept as sent (not trimmed) that must still say something."""
    if isinstance(value, str) and not value.strip():
        raise serializers.ValidationError("Must contain something other than spaces.")


class UniqueListField(serializers.ListField):
    """A list whose items may not repeat (the schema says `uniqueItems`)."""

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise serializers.ValidationError(f"Repeated items: {', '.join(repeated)}.")
        return values
