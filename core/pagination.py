"""Limit/offset pagination that refuses what it cannot honour instead of guessing."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10_000_000


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """`limit` 1..200 (default 50), `offset` 0..10,000,000; anything else, repeated or not a
    number, is a 400 naming the parameter (DRF's own class would quietly fall back)."""

    default_limit = 50
    max_limit = 200

    def _parameter(self, request, name: str, *, low: int, high: int) -> int | None:
        values = request.query_params.getlist(name)
        if not values:
            return None
        if len(values) > 1:
            raise ValidationError({name: ["Give this parameter once."]})
        text = values[0]
        if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
            raise ValidationError({name: [f"A whole number from {low} to {high}."]})
        return int(text)

    def get_limit(self, request):
        value = self._parameter(request, self.limit_query_param, low=1, high=self.max_limit)
        return self.default_limit if value is None else value

    def get_offset(self, request):
        return self._parameter(request, self.offset_query_param, low=0, high=MAX_OFFSET) or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_limit})
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update({"minimum": 0, "maximum": MAX_OFFSET})
        return parameters
