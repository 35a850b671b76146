"""One persona's Schemathesis pass: two `schemathesis run` commands against the live schema.

Every check, every phase, and each command ends when its work is done or its clock runs out:
  - "coverage": the examples phase (the schema's own) and the coverage phase (every case the schema
    defines, for every operation: thousands a persona), cut by `--coverage-time`. Schemathesis keeps
    no time for phases that follow in another command, so the whole cap goes to coverage.
  - "fuzzing": the fuzzing phase (`--max-examples` generated cases per operation) and the stateful
    phase (`--stateful-examples` chains of requests following the schema's links), each once. Run
    in the same command, the stateful phase infers links from the fuzzing phase's responses. With a
    time budget (`--operator-time`, `--admin-time`) Schemathesis repeats both until it is spent.
In one command with a budget, Schemathesis would hold two thirds of it back for fuzzing and stateful
and then repeat them until the clock ends, however little is new; without one, coverage runs to
its end. The hooks of tests/fuzz/hooks.py apply; JUnit, JSON and NDJSON reports go to
<results>/<persona>/<command>/, the output of both commands to <results>/schemathesis-<persona>.log.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.fuzz.pass_report import merge_parts, read_part
from tests.fuzz.rules import DROPS_ENV
from tests.fuzz.schemathesis_config import FORBIDDEN_EXAMPLES, few_case_operations, only_pattern, write_config

HOOKS = Path(__file__).resolve().with_name("hooks.py")
# Command name -> the phases it runs.
COMMANDS = {"coverage": "examples,coverage", "fuzzing": "fuzzing,stateful"}

_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def stop_all() -> None:
    """Kill every Schemathesis still running: the run was interrupted."""
    with _running_lock:
        for process in _running:
            if process.poll() is None:
                process.kill()


def run_pass(*, base: str, persona: str, credentials: dict[str, dict[str, str]], peers: list[str], tools: list[str],
             tool_sources: list[str], forbidden: list[tuple[str, str]], tmp: Path, results: Path,
             args: argparse.Namespace, desk: dict[str, list[str]], only: list[tuple[str, str]] | None = None,
             budget: int | None = None) -> dict:
    """Run both commands as `persona` against the server at `base`; the pass's summary.

    `forbidden`: the operations the role matrix refuses the persona (its rows' method and route); most
    get a few fuzzing cases only (tests/fuzz/schemathesis_config.py says which and why). `only`: the
    operations the pass is limited to (rows as the matrix names them), None for every one.
    `budget`: seconds for fuzzing and stateful, repeated within it (None: each once)."""
    few_cases = [] if only else few_case_operations(forbidden)
    config = write_config(persona=persona, peers=peers, credentials=credentials, tools=tools,
                          tool_sources=tool_sources, few_cases=few_cases, max_examples=args.max_examples,
                          stateful_examples=args.stateful_examples, directory=tmp, desk=desk if only else None)
    signed_in = "a session" if "Cookie" in credentials[persona] else "a token"
    print(f"\n=== schemathesis as {persona} with {signed_in}"
          + (f" (peers: {', '.join(peers)})" if len(peers) > 1 else "")
          + f": coverage for at most {args.coverage_time}s, then "
          + (f"fuzzing and stateful for {budget}s" if budget else
             f"{args.max_examples} fuzzing cases per operation and {args.stateful_examples} stateful scenarios")
          + ", all checks (use_after_free off for GET and PATCH skills/{name}/ only); "
          + (f"only {len(only)} operations: {', '.join(f'{m} {r}' for m, r in only)} ===" if only else
             f"{len(few_cases)} of the {len(forbidden)} operations the role matrix refuses {persona}:"
             f" {FORBIDDEN_EXAMPLES} fuzzing cases each, no coverage or stateful ==="), flush=True)
    log_path = results / f"schemathesis-{persona}.log"
    drops = results / persona / "dropped.jsonl"
    started = time.monotonic()
    parts = []
    with open(log_path, "w") as log:
        for name, time_limit in (("coverage", args.coverage_time), ("fuzzing", budget)):
            report_dir = results / persona / name
            command = _command(base=base, headers=credentials[persona], config=config, phases=COMMANDS[name],
                               time_limit=time_limit, report_dir=report_dir, args=args, only=only)
            log.write(f"$ schemathesis run --phases {COMMANDS[name]}\n")
            log.flush()
            exit_code = _run(command, cwd=tmp, drops=drops, log=log, verbose=args.verbose)
            parts.append(read_part(name, report_dir, exit_code))
    summary = merge_parts(parts, drops)
    summary.update(persona=persona, seconds=time.monotonic() - started, log=str(log_path))
    return summary


def _command(*, base: str, headers: dict[str, str], config: Path, phases: str, time_limit: int | None,
             report_dir: Path, args: argparse.Namespace, only: list[tuple[str, str]] | None) -> list[str]:
    report_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
        "run", f"{base}/api/v1/schema/",
        # Two passes start at once, each on a cold server: the first schema request can take longer
        # than Schemathesis' 10 s for loading it, so it retries for up to two minutes.
        "--wait-for-schema", "120",
        # The schema itself needs a logged-in user.
        *[argument for header, value in headers.items() for argument in ("--header", f"{header}: {value}")],
        "--phases", phases,
        "--workers", str(args.workers),
        "--request-timeout", "60",
        "--generation-database", "none",
        # Hypothesis' too_slow health check times the generator on the wall clock: at load 10 to 12 on the
        # two cores (3 December) it stopped the fuzzing phase of POST runs/, agents/, policies/evaluate/golden/
        # and standing-approvals/, a verdict on the machine and not on the API.
        "--suppress-health-check", "too_slow",
        "--report", "junit,json,ndjson",
        "--report-dir", str(report_dir),
        "--report-junit-path", str(report_dir / "junit.xml"),
        "--report-json-path", str(report_dir / "report.json"),
        "--report-ndjson-path", str(report_dir / "events.ndjson"),
        "--no-color",
    ]
    if only:
        command += ["--include-name-regex", only_pattern(only)]
    if time_limit:
        command += ["--max-time", str(time_limit)]
    if args.seed is not None:
        command += ["--seed", str(args.seed)]
    return command


def _run(command: list[str], *, cwd: Path, drops: Path, log, verbose: bool) -> int:
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), DROPS_ENV: str(drops)}
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with _running_lock:
        _running.add(process)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            log.write(line)
            if verbose:
                sys.stdout.write(line)
        return process.wait()
    finally:
        if process.poll() is None:  # interrupted: take Schemathesis down with us
            process.kill()
            process.wait()
        with _running_lock:
            _running.discard(process)
