import pytest

from tests.evidence.bundles import standard_ledger


@pytest.fixture
def ledger():
    """The standard ledger of tests/evidence/bundles.py: four sealed runs, checkpointed and witnessed."""
    return standard_ledger()
