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
            if refused:
                raise serializers.ValidationError(refused)
        return super().to_internal_value(data)

    def _refusal(self, key: str) -> str:
        if key in self.hints:
            return self.hints[key]
        return "This field is read-only." if key in self.read_only_names or key in self.fields else "Unknown field."


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    pass
