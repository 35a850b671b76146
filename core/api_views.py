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


def proposal_decision_view(*, decide, model, serializer, permission, operation: str, name: str, summary: str,
                           description: str):
    """POST on a maker-checker proposal (core.proposals): `decide(proposal, user=)` (approve, refuse or
    withdraw), answered with the proposal as it is then. `operation` is its schema operation id, `name`
    the view class's name."""
    from drf_spectacular.utils import extend_schema
    from rest_framework.generics import GenericAPIView
    from rest_framework.response import Response

    class DecisionApi(GenericAPIView):
        permission_classes = [permission]
        serializer_class = serializer
        queryset = model.objects.all()
        lookup_url_kwarg = "proposal_id"

        @extend_schema(operation_id=operation, summary=summary, description=description,
                       request=None, responses={200: serializer, **errors(400, 403, 404, 409)})
        def post(self, request, proposal_id):
            return Response(serializer(decide(self.get_object(), user=request.user)).data)

    DecisionApi.__name__ = DecisionApi.__qualname__ = name
    return DecisionApi
