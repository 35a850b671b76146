"""What a pass's reports say: Schemathesis' JSON report and NDJSON events, per command and merged."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

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
# Command -> the phases whose status it reports (the others it skips by design).
PHASES_OF = {"coverage": ("examples", "coverage"), "fuzzing": ("fuzzing", "stateful")}


def read_part(name: str, report_dir: Path, exit_code: int) -> dict:
    """One command's summary: its JSON report, the requests and links of its events, its exit code."""
    part = _read_report(report_dir / "report.json")
    part.update(_read_events(report_dir / "events.ndjson"), name=name, exit_code=exit_code)
    part["phases"] = {phase: status for phase, status in part.get("phases", {}).items() if phase in PHASES_OF[name]}
    return part


def merge_parts(parts: list[dict], drops: Path) -> dict:
    """A persona's summary from its commands' summaries (a missing report makes the pass fail)."""
    summary: dict = {
        "exit_code": next((part["exit_code"] for part in parts if part["exit_code"] != 0), 0),
        "missing_report": any(part.get("missing_report") for part in parts),
        "seed": ", ".join(sorted({str(part.get("seed")) for part in parts})),
        "dropped_by_reason": _drops_by_reason(drops),
        "operations_tested": 0, "operations_selected": 0, "operations_errored": 0,
        "test_cases": 0, "unique_failures": 0, "dropped": 0, "failures": [], "errors": [], "phases": {},
        "cases_by_phase": Counter(), "links_total": 0, "links_tried": 0, "links_applied": 0, "warnings": {},
    }
    for part in parts:
        if part.get("missing_report"):
            continue
        # Each command reaches every operation it can; the fuzzing phase has always reached them all.
        for key in ("operations_tested", "operations_selected"):
            summary[key] = max(summary[key], part[key])
        for key in ("operations_errored", "test_cases", "unique_failures", "dropped", "links_tried", "links_applied"):
            summary[key] += part[key]
        summary["links_total"] = max(summary["links_total"], part["links_total"])
        summary["failures"] += part["failures"]
        summary["errors"] += part["errors"]
        summary["phases"].update(part["phases"])
        summary["cases_by_phase"].update(part["cases_by_phase"])
        for warning, items in part["warnings"].items():
            summary["warnings"].setdefault(warning, set()).update(items if isinstance(items, list) else [])
    return summary


def _drops_by_reason(path: Path) -> Counter:
    try:
        return Counter(json.loads(line)["reason"] for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return Counter()


def _read_events(path: Path) -> dict:
    """Requests per phase, and the links the stateful phase followed."""
    requests: Counter = Counter()
    links_tried: set[str] = set()
    links_applied: set[str] = set()
    links_total = 0
    try:
        lines = path.open()
    except OSError:
        return {"cases_by_phase": requests, "links_total": 0, "links_tried": 0, "links_applied": 0}
    with lines:
        for line in lines:
            # Only two kinds of events matter; the log is megabytes of cases, so skip the rest unparsed.
            if line.startswith('{"ScenarioFinished"'):
                event = json.loads(line)["ScenarioFinished"]
                for case in ((event.get("recorder") or {}).get("cases") or {}).values():
                    requests[event["phase"]] += 1
                    if case.get("transition"):
                        links_tried.add(case["transition"]["id"])
                        if case.get("is_transition_applied"):
                            links_applied.add(case["transition"]["id"])
            elif line.startswith('{"PhaseStarted"') and '"stateful"' in line:
                payload = json.loads(line)["PhaseStarted"].get("payload") or {}
                links_total = max(links_total, payload.get("transitions_selected") or 0)
    return {"cases_by_phase": requests, "links_total": links_total,
            "links_tried": len(links_tried), "links_applied": len(links_applied)}


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
    if "error" in summary:
        print(f"--- {summary['persona']}: could not run: {summary['error']}")
        return
    print(f"--- {summary['persona']}: exit {summary['exit_code']}, {summary['seconds']:.0f}s, seed {summary.get('seed')}")
    if summary.get("missing_report"):
        print(f"    a JSON report is missing; see {summary['log']}")
    print(f"    operations tested: {summary['operations_tested']}/{summary['operations_selected']}"
          f" (errored: {summary['operations_errored']})")
    print(f"    test cases: {summary['test_cases']}, unique failures: {summary['unique_failures']},"
          f" dropped: {summary['dropped']} ({_reasons(summary.get('dropped_by_reason'))})")
    by_phase = summary["cases_by_phase"]
    print("    phases: " + ", ".join(f"{name} {status} ({by_phase.get(name, 0)} requests)"
                                     for name, status in summary["phases"].items()))
    print(f"    stateful links: {summary['links_total']} known, {summary['links_tried']} tried,"
          f" {summary['links_applied']} followed")
    if not summary["failures"]:
        print("    failures by check: none")
    for failure in summary["failures"]:
        print(f"    FAIL {failure['code']} {failure['title']} [{failure['check']}]: {failure['count']}"
              f" in {', '.join(failure['operations'])}")
    for error in summary["errors"]:
        print(f"    ERROR {error['title']}: {error['count']}")
    for name, items in summary["warnings"].items():
        print(f"    warning {name}: {len(items)} operation(s)")


def _reasons(counts: Counter | None) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted((counts or {}).items())) or "none"
