"""Input serializers that refuse what they do not accept: no mass assignment, and no silence.

DRF drops unknown keys, so a client sending `status` or `version` would believe it had set
them. A strict serializer answers 400 and names every refused field instead.
"""

from collections.abc import Mapping

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
            refused |= {key: ["Not a valid string."] for key in data if key in writable and _not_text(self.fields[key], data[key])}
            if refused:
                raise serializers.ValidationError(refused)
        return super().to_internal_value(data)

    def _refusal(self, key: str) -> str:
        if key in self.hints:
            return self.hints[key]
        return "This field is read-only." if key in self.read_only_names or key in self.fields else "Unknown field."


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    pass


def _not_text(field, value) -> bool:
    """DRF's CharField turns 4.5 into "4.5"; a strict API refuses a number where text is declared."""
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        return any(_not_text(field.child, item) for item in value)
    return isinstance(field, serializers.CharField) and value is not None and not isinstance(value, str)


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
