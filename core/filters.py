"""A filter backend that refuses what it cannot apply, instead of quietly ignoring it.

django-filter drops an empty value, a repeated parameter or an unreadable boolean and returns
the unfiltered list, which a client reads as an answer to the question it asked.
"""

from datetime import UTC

import django_filters
from django import forms
from django.core.exceptions import ValidationError as FieldError
from django_filters.fields import IsoDateTimeField
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError

BOOLEANS = {"true", "false"}


class StrictFilterBackend(DjangoFilterBackend):
    def get_filterset(self, request, queryset, view):
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            problems = {}
            for name, declared in filterset.filters.items():
                values = request.query_params.getlist(name)
                if not values:
                    continue
                if len(values) > 1:
                    problems[name] = ["Give this parameter once."]
                elif values[0] == "":
                    problems[name] = ["An empty value filters nothing; leave the parameter out instead."]
                elif isinstance(declared, django_filters.BooleanFilter) and values[0] not in BOOLEANS:
                    problems[name] = ["Use true or false."]
            if problems:
                raise ValidationError(problems)
        return filterset


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 time the database can compare: a well-formed one at the edge of the calendar
    (0001-01-01T00:00+01:00) has no UTC time, and the query would fail with a 500."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is not None and value.tzinfo is not None:
            try:
                value.astimezone(UTC)
            except OverflowError:
                raise FieldError("falls outside the years 1 to 9999 in UTC", code="invalid") from None
        return value


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class IntegerFilter(django_filters.NumberFilter):
    """A whole number, refused (400) unless it lies between the filter's min_value and max_value:
    NumberFilter takes any decimal (1e308 among them), and a number the column cannot hold fails in
    the database with a 500."""

    field_class = forms.IntegerField
