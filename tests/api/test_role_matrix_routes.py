"""The URL conf and the role matrix agree: every operation has a reviewed row, every row an operation."""

import re

from django.urls import URLPattern, URLResolver, get_resolver

from tests.api.role_matrix import MATRIX

IGNORED_METHODS = {"options", "head"}


def _walk(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def _as_route(pattern: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", pattern)


def _api_operations() -> dict[tuple[str, str], str]:
    """(METHOD, route) -> the view, for every route under api/v1/ and every method its view serves."""
    operations = {}
    for pattern, callback in _walk(get_resolver().url_patterns):
        if not pattern.startswith("api/v1/"):
            continue
        route = _as_route(pattern.removeprefix("api/v1/"))
        view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        assert view_class is not None, f"api/v1/{route} is served by a function view; the matrix cannot see its methods"
        methods = {m for m in view_class.http_method_names if hasattr(view_class, m)} - IGNORED_METHODS
        assert methods, f"api/v1/{route} ({view_class.__name__}) serves no method"
        for method in methods:
            operations[(method.upper(), route)] = f"{view_class.__module__}.{view_class.__qualname__}"
    return operations


def test_every_route_and_method_has_a_reviewed_row():
    missing = sorted(f"{method} /api/v1/{route} ({view})" for (method, route), view in _api_operations().items()
                     if (method, route) not in MATRIX)
    assert not missing, "API operations without a row in the role matrix (review who may call them):\n" + "\n".join(missing)


def test_every_row_names_an_existing_route():
    operations = _api_operations()
    stale = sorted(f"{method} {route}" for method, route in MATRIX if (method, route) not in operations)
    assert not stale, "rows of the role matrix for operations the URL conf no longer serves:\n" + "\n".join(stale)


def test_the_walk_sees_the_whole_api():
    # Guards the walker itself: if it stopped descending into includes, the two tests above
    # would pass vacuously.
    operations = _api_operations()
    assert len(operations) == len(MATRIX) >= 40
    assert ("POST", "approvals/{approval_id}/approve/") in operations
    assert ("GET", "agents/{slug}/versions/{version}/") in operations
