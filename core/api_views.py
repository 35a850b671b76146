"""Pieces every app's API views share: the documented error responses and the paginated list."""

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()

    class Meta:
        ref_name = "ErrorDetail"


class ErrorBodySerializer(serializers.Serializer):
    """The one error shape of the API (core.api_errors)."""

    error = ErrorSerializer()

    class Meta:
        ref_name = "Error"


def errors(*codes: int) -> dict:
    """The documented error responses of an operation, all in the one error shape."""
    return {code: ErrorBodySerializer for code in codes}


class PaginatedList:
    """GET of a paginated, filterable list, for a GenericAPIView."""

    def list_response(self):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
