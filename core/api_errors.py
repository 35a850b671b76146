"""One exception handler: every API error leaves as {"error": {"code", "message", "details"}}."""

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


logger = logging.getLogger(__name__)


class DomainError(Exception):
    """A refusal the API maps to a status code: subclasses set `status_code` and `code`."""

    status_code = status.HTTP_400_BAD_REQUEST
    code = "invalid"

    def __init__(self, message: str, *, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


class Conflict(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "conflict"


class Forbidden(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "forbidden"


class NotFound(DomainError):
    status_code = status.HTTP_404_NOT_FOUND
    code = "not_found"


class Unprocessable(DomainError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    code = "unprocessable"


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _contention(exc: Exception) -> bool:
    """A deadlock or serialization failure: the database is up, the transaction lost a race."""
    # SQLSTATE 40001 serialization_failure, 40P01 deadlock_detected.
    return getattr(exc.__cause__, "sqlstate", None) in ("40001", "40P01")


def exception_handler(exc, context):
    if isinstance(exc, OperationalError) and _contention(exc):
        return Response(error_body("database_busy", "The request collided with another; retry it."),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "1"})
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is unreachable: a temporary condition the client may retry, not a bug.
        logger.error("database unavailable: %s", exc)
        return Response(error_body("database_unavailable", "The database is unavailable; retry later."),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "5"})
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("request_too_large", "The request body is larger than this server accepts.",
                                   {"limit_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}),
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        code, message, details = "invalid", "The request is not valid.", exc.detail
        if not isinstance(details, dict):
            details = {"non_field_errors": details}
    else:
        code = getattr(exc, "default_code", "error")
        message = str(exc.detail) if not isinstance(exc.detail, (dict, list)) else str(exc.default_detail)
        details = {}
    response.data = error_body(code, message, details)
    return response


def json_404(request, exception=None):
    from django.http import JsonResponse
    from django.views.defaults import page_not_found

    if not request.path.startswith("/api/"):
        return page_not_found(request, exception)
    return JsonResponse(error_body("not_found", "Not found."), status=404)


def json_500(request):
    from django.http import JsonResponse

    return JsonResponse(error_body("internal", "Internal server error."), status=500)
