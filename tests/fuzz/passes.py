"""One Schemathesis pass as one persona, and what its report says.

A pass runs `schemathesis run` against the live schema (loaded with the persona's token) with
every check and every phase (examples, coverage, fuzzing, stateful), the hooks of
tests/fuzz/hooks.py, and JUnit, JSON and NDJSON reports in the persona's results directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.rules import DROPS_ENV
from tests.fuzz.schemathesis_config import write_config

HOOKS = Path(__file__).resolve().with_name("hooks.py")

# Failure code -> the Schemathesis check that reports it.
CHECK_OF_CODE = {
    "ST101": "not_a_server_error", "ST102": "not_a_server_error", "ST103": "status_code_conformance",
    "ST104": "content_type_conformance", "ST105": "content_type_conformance", "ST106": "content_type_conformance",
    "ST107": "response_headers_conformance", "ST108": "response_schema_conformance",
    "ST109": "response_schema_conformance", "ST110": "response_schema_conformance",
    "ST111": "response_schema_conformance", "ST112": "max_response_time", "ST201": "negative_data_rejection",
    "ST202": "positive_data_acceptance", "ST203": "missing_required_header", "ST204": "unsupported_method",
    "ST205": "allow_header_conformance", "ST301": "use_after_free", "ST302": "ensure_resource_availability",
    "ST401": "ignored_auth", "ST402": "object_level_authorization",
}


def run_pass(*, base: str, persona: str, tokens: dict[str, str], peers: list[str], tools: list[str],
             tool_sources: list[str], tmp: Path, results: Path, args: argparse.Namespace) -> dict:
    """Run Schemathesis as `persona` against the server at `base`; the pass's summary."""
    config = write_config(persona=persona, peers=peers, tokens=tokens, tools=tools, tool_sources=tool_sources,
                          directory=tmp)
    report_dir = results / persona
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
        "run", f"{base}/api/v1/schema/",
        # The schema itself needs a logged-in user.
        "--header", f"Authorization: Token {tokens[persona]}",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(args.max_examples),
        "--max-time", str(args.operator_time if persona == "operator" else args.admin_time),
        "--workers", str(args.workers),
        "--request-timeout", "60",
        "--generation-database", "none",
        "--report", "junit,json,ndjson",
        "--report-dir", str(report_dir),
        "--report-junit-path", str(report_dir / "junit.xml"),
        "--report-json-path", str(report_dir / "report.json"),
        "--report-ndjson-path", str(report_dir / "events.ndjson"),
        "--no-color",
    ]
    if args.seed is not None:
        command += ["--seed", str(args.seed)]
    report_dir.mkdir(parents=True, exist_ok=True)
    drops = report_dir / "dropped.jsonl"
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), DROPS_ENV: str(drops)}
    print(f"\n=== schemathesis as {persona}" + (f" (peers: {', '.join(peers)})" if len(peers) > 1 else "")
          + f": budget {command[command.index('--max-time') + 1]}s, all checks"
          + " (use_after_free off for GET and PATCH skills/{name}/ only) ===", flush=True)
    started = time.monotonic()
    with open(report_dir.parent / f"schemathesis-{persona}.log", "w") as log:
        process = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        assert process.stdout is not None
        try:
            for line in process.stdout:
                log.write(line)
                if args.verbose:
                    sys.stdout.write(line)
            process.wait()
        finally:
            if process.poll() is None:  # interrupted: take Schemathesis down with us
                process.kill()
                process.wait()
    summary = _read_report(report_dir / "report.json")
    summary["dropped_by_reason"] = _drops_by_reason(drops)
    summary.update(persona=persona, exit_code=process.returncode, seconds=time.monotonic() - started,
                   log=str(report_dir.parent / f"schemathesis-{persona}.log"))
    return summary


def _drops_by_reason(path: Path) -> Counter:
    try:
        return Counter(json.loads(line)["reason"] for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return Counter()


def _read_report(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"missing_report": True}
    operations = document.get("operations") or {}
    cases = document.get("test_cases") or {}
    return {
        "operations_tested": operations.get("tested", 0),
        "operations_selected": operations.get("selected", 0),
        "operations_errored": operations.get("errored", 0),
        "test_cases": cases.get("generated", 0),
        "unique_failures": cases.get("unique_failures", 0),
        "dropped": document.get("filtered") or 0,
        "failures": [
            {"code": item["code"], "title": item["title"], "check": CHECK_OF_CODE.get(item["code"], item["type"]),
             "count": item["count"], "operations": item["operations"]}
            for item in document.get("failures", [])
        ],
        "errors": document.get("errors", []),
        "phases": {name: phase["status"] for name, phase in (document.get("phases") or {}).items()},
        "seed": document.get("seed"),
        "complete": document.get("complete"),
        "warnings": {name: items for name, items in (document.get("warnings") or {}).items() if items},
    }


def print_pass(summary: dict) -> None:
    print(f"--- {summary['persona']}: exit {summary['exit_code']}, {summary['seconds']:.0f}s, seed {summary.get('seed')}")
    if summary.get("missing_report"):
        print(f"    no JSON report was written; see {summary['log']}")
        return
    print(f"    operations tested: {summary['operations_tested']}/{summary['operations_selected']}"
          f" (errored: {summary['operations_errored']})")
    print(f"    test cases: {summary['test_cases']}, unique failures: {summary['unique_failures']},"
          f" dropped: {summary['dropped']} ({_reasons(summary.get('dropped_by_reason'))})")
    print(f"    phases: {', '.join(f'{name} {status}' for name, status in summary['phases'].items())}")
    if not summary["failures"]:
        print("    failures by check: none")
    for failure in summary["failures"]:
        print(f"    FAIL {failure['code']} {failure['title']} [{failure['check']}]: {failure['count']}"
              f" in {', '.join(failure['operations'])}")
    for error in summary["errors"]:
        print(f"    ERROR {error['title']}: {error['count']}")
    for name, items in summary["warnings"].items():
        if isinstance(items, list):
            print(f"    warning {name}: {len(items)} operation(s)")


def _reasons(counts: Counter | None) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted((counts or {}).items())) or "none"
