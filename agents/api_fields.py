"""API fields the agents app's views share."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents import services


@extend_schema_field({"type": "number", "format": "double", "minimum": 0, "exclusiveMinimum": True,
                     "maximum": services.MAX_TIMEOUT_SECONDS})
class TimeoutField(serializers.FloatField):
    """Seconds: more than 0 and at most 600."""

    def __init__(self, **kwargs):
        super().__init__(validators=[services.timeout_validator], **kwargs)
