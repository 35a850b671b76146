"""The injection suite's figures, printed after the run so `make test` shows them."""

FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("security figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
