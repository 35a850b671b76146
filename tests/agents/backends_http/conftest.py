import pytest

from tests.agents.backends_http.server import ModelServer


@pytest.fixture
def model_server():
    server = ModelServer()
    yield server
    server.close()


@pytest.fixture
def fast_retries(settings):
    """Backoff in milliseconds, so the tests exercise retries without waiting for them."""
    settings.WARRANT = settings.WARRANT | {"MODEL_RETRY_BASE_SECONDS": 0.01, "MODEL_RETRY_MAX_SECONDS": 0.05,
                                           "MODEL_RETRY_BUDGET_SECONDS": 10, "MODEL_BREAKER_FAILURES": 3,
                                           "MODEL_BREAKER_COOLDOWN_SECONDS": 60}
