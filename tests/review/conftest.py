"""Review records are append-only in the database too: a transactional test's flush must first
lift the review triggers on SQLite (PostgreSQL's replica mode, tests/conftest.py, skips them)."""

import pytest


@pytest.fixture(autouse=True)
def _review_flush_allowed(request):
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker and marker.kwargs.get("transaction")) or "transactional_db" in request.fixturenames
    if not transactional:
        yield
        return
    request.getfixturevalue("transactional_db")
    from django.db import connection

    from review import append_only

    if connection.vendor != "sqlite":
        yield
        return
    append_only.TRIGGERS.create(connection)
    yield
    append_only.TRIGGERS.drop(connection)
