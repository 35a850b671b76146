"""`manage.py run_evals` as a shell runs it, from a test."""

from django.core.management import ManagementUtility
from django.test import override_settings


def run_evals_cli(*args: str) -> int:
    """Its exit code. ManagementUtility runs Django's setup again, which would configure logging
    anew with this test's captured stderr as the root handler's stream (closed after the test, so
    a later test that logs fails): the setup leaves logging as it is."""
    try:
        with override_settings(LOGGING_CONFIG=None):
            ManagementUtility(["manage.py", "run_evals", *args]).execute()
    except SystemExit as exc:
        return exc.code
    return 0
