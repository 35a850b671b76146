"""The benchmarks, each scenario once with tiny N, so they cannot rot. Not timed: it checks that
every scenario runs against the real services, gets the right answers and writes its results."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {"harness", "approval", "distributed", "api", "engine", "receipts", "context", "memory"}


def test_every_benchmark_scenario_runs_once_and_writes_its_results(tmp_path):
    # The bench venv comes from the project's own files (a no-op when it is up to date).
    subprocess.run(["make", "-s", "bench-install", f"PYTHON={sys.executable}"], cwd=ROOT, check=True)
    env = dict(os.environ, BENCH_DB_PREFIX="warrant_bench_smoke")
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG"):
        env.pop(name, None)
    done = subprocess.run([str(ROOT / ".venv-bench" / "bin" / "python"), "-m", "bench.run", "--smoke", "--out",
                           str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    records = [r for r in lines if r["scenario"] != "_run"]
    assert {r["scenario"] for r in records} == SCENARIOS
    # A difference of two timings (a framework's CPU beyond the tools') may come out at any sign
    # with one run; every measured figure is positive.
    assert all((r["value"] > 0 or r["metric"] == "cpu_ms_beyond_tools") and r["smoke"] for r in records)
    variants = {(r["scenario"], r["variant"]) for r in records}
    for expected in [("harness", "warrant"), ("harness", "langgraph"), ("harness", "pydantic_ai"), ("harness", "tools alone"),
                     ("approval", "warrant"), ("approval", "langgraph"), ("approval", "pydantic_ai"),
                     ("distributed", "warrant, 1 worker"), ("distributed", "floor, 1 worker"),
                     ("api", "runs"), ("api", "floor"), ("receipts", "warrant"), ("receipts", "floor")]:
        assert expected in variants
    results = (tmp_path / "RESULTS.md").read_text()
    assert "Smoke run" in results and "## Targets and ratios" in results
