"""Schemathesis against a live Warrant (tests/fuzz/run_schemathesis.py), as one pytest test.

The script builds its own SQLite database and two gunicorn servers from a clean environment, so
this test needs no Django database and runs the same under any pytest pass. Each persona's pass
ends when its work is done (coverage capped at FUZZ_COVERAGE_SECONDS, fuzzing and stateful once),
so its length follows the machine's load: 3 min 10 s at load average 4-6 on two cores, 13 min 12 s
at 9-15 (docs/testing.md); TIMEOUT_SECONDS is a bound above that. Run it on its own with
`.venv/bin/python -m pytest tests/fuzz/test_schemathesis.py` (the reports land in var/fuzz-results/latest/).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("run_schemathesis.py")
REPO = SCRIPT.parents[2]
TIMEOUT_SECONDS = 25 * 60  # a run took 13 min at load 9-15, when 15 min was the bound


def test_schemathesis_finds_no_server_error_nor_schema_violation():
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        pytest.fail("schemathesis is not installed: .venv/bin/pip install -r requirements-test.txt")
    # Its own process group, so that a timeout stops the script and Schemathesis with it; the
    # script stops its gunicorn on SIGTERM.
    process = subprocess.Popen([sys.executable, str(SCRIPT)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        pytest.fail(f"run_schemathesis.py did not finish in {TIMEOUT_SECONDS}s:\n{output[-12000:]}", pytrace=False)
    if process.returncode != 0:
        pytest.fail(f"run_schemathesis.py exited {process.returncode}:\n{output[-12000:]}", pytrace=False)
    print(output)  # the counts, with -s
