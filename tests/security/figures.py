"""The injection suites' figures: each suite adds its lines, and tests/conftest.py prints them after
the run (gathered from every pytest-xdist worker), so `make test` shows them."""

FIGURES: list[str] = []
