"""bench/RESULTS.md from the JSON lines: medians, spread, and ratios pair by pair (same rep)."""

import os
from pathlib import Path

from bench.common import median

TITLES = {
    "harness": "1. Harness overhead, embedded default (scripted agent, 3 tool calls + answer, sequential runs)",
    "approval": "2. Approval path (compute_health_score approved programmatically)",
    "distributed": "3. Distributed: PostgreSQL + Redis + Celery workers, runs fired at once",
    "api": "4. API: POST /api/v1/runs/ (queued, not executed), 32 concurrent clients, gunicorn",
    "engine": "5. Policy engine: one 2,000-character input against N keyword policies",
    "receipts": "6. Receipt verification",
    "context": "7. Context size: 100 tools, 30 skills",
    "memory": "8. Memory of a worker",
}
# (scenario, metric, a, b, target op, target, what the ratio means)
PAIRS = [
    ("harness", "runs_per_s", "warrant", "langgraph", ">=", 2.0, "Warrant ÷ LangGraph (runs/s)"),
    ("harness", "runs_per_s", "warrant", "pydantic_ai", None, None, "Warrant ÷ Pydantic AI (runs/s)"),
    ("approval", "runs_per_s", "warrant", "langgraph", ">=", 2.0, "Warrant ÷ LangGraph (runs/s)"),
    ("approval", "runs_per_s", "warrant", "pydantic_ai", None, None, "Warrant ÷ Pydantic AI (runs/s)"),
    ("harness", "cpu_ms_per_run", "langgraph", "warrant", None, None, "LangGraph ÷ Warrant (CPU ms per run)"),
    ("approval", "cpu_ms_per_run", "langgraph", "warrant", None, None, "LangGraph ÷ Warrant (CPU ms per run)"),
    ("harness", "cpu_ms_beyond_tools", "langgraph", "warrant", None, None,
     "LangGraph ÷ Warrant (CPU ms per run beyond the tools' own)"),
    ("approval", "cpu_ms_beyond_tools", "langgraph", "warrant", None, None,
     "LangGraph ÷ Warrant (CPU ms per run beyond the tools' own)"),
    # The target is against the floor that makes the same commits (issue #19): a run that must
    # reach the disk a few times is not compared with a chain that never does, but both are shown.
    ("distributed", "runs_per_s", "warrant, 1 worker", "floor+db, 1 worker", ">=", 0.6,
     "Warrant ÷ floor with the run's commits, 1 worker"),
    ("distributed", "runs_per_s", "warrant, 2 workers", "floor+db, 2 workers", ">=", 0.6,
     "Warrant ÷ floor with the run's commits, 2 workers"),
    ("distributed", "runs_per_s", "warrant, 1 worker", "floor, 1 worker", None, None, "Warrant ÷ no-op Celery floor, 1 worker"),
    ("distributed", "runs_per_s", "warrant, 2 workers", "floor, 2 workers", None, None,
     "Warrant ÷ no-op Celery floor, 2 workers"),
    ("distributed", "runs_per_s", "warrant, 2 workers", "warrant, 1 worker", ">=", 1.8, "Warrant, 2 workers ÷ 1 worker"),
    ("distributed", "runs_per_s", "floor+db, 2 workers", "floor+db, 1 worker", None, None,
     "floor with the run's commits, 2 workers ÷ 1"),
    ("distributed", "runs_per_s", "floor, 2 workers", "floor, 1 worker", None, None, "Celery floor, 2 workers ÷ 1"),
    ("api", "req_per_s", "runs", "floor", ">=", 0.5, "POST runs ÷ floor endpoint (req/s)"),
    ("api", "p50_ms", "runs", "floor", None, None, "POST runs ÷ floor (p50 latency)"),
    ("api", "p99_ms", "runs", "floor", None, None, "POST runs ÷ floor (p99 latency)"),
    ("engine", "us_per_input", "index, 10000", "index, 10", "<=", 3.0, "cost at 10,000 policies ÷ cost at 10"),
    ("engine", "us_per_input", "index, 1000", "index, 10", None, None, "cost at 1,000 policies ÷ cost at 10"),
    ("engine", "us_per_input", "one at a time, 10000", "index, 10000", None, None,
     "one policy at a time (the engine before) ÷ index, 10,000 policies"),
    ("receipts", "receipts_per_s", "warrant", "floor", ">=", 0.25, "verify_chain ÷ hashlib alone (receipts/s)"),
    ("context", "input_tokens", "scoped, skills on demand", "all tools, all skill bodies inline", None, None,
     "scoped + on demand ÷ everything inline (tokens)"),
]


def _fmt(value: float) -> str:
    if value != value:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _series(records, scenario, metric, variant):
    return {r["rep"]: r["value"] for r in records
            if r["scenario"] == scenario and r["metric"] == metric and r["variant"] == variant}


def _pairs(records):
    rows = []
    for scenario, metric, a, b, op, target, label in PAIRS:
        sa, sb = _series(records, scenario, metric, a), _series(records, scenario, metric, b)
        ratios = [sa[rep] / sb[rep] for rep in sorted(sa) if rep in sb and sb[rep]]
        if not ratios:
            continue
        rows.append((scenario, label, ratios, op, target))
    for metric, name, op, target in (("anon_mib", "anonymous memory (heap)", "<=", 1.10),
                                     ("rss_mib", "RSS, with the mapped database file", None, None)):
        marks = sorted((r for r in records if r["scenario"] == "memory" and r["metric"] == metric),
                       key=lambda r: r["runs"])
        if len(marks) >= 2:
            ratio = marks[-1]["value"] / marks[0]["value"]
            rows.append(("memory", f"{name} after {marks[-1]['runs']} runs ÷ after {marks[0]['runs']}", [ratio], op, target))
    order = list(dict.fromkeys(pair[0] for pair in PAIRS))
    return sorted(rows, key=lambda row: order.index(row[0]) if row[0] in order else len(order))


def _met(ratio, op, target):
    if op is None:
        return ""
    return "yes" if (ratio >= target if op == ">=" else ratio <= target) else "**no**"


def write(path: Path, records: list[dict], *, machine: dict, failed: list[str], smoke: bool) -> None:
    lines = ["# Benchmark results", ""]
    if smoke:
        lines += ["**Smoke run** (each scenario once, tiny N): these figures prove the scripts work, nothing more.", ""]
    lines += [
        "Written by `make bench` (`python -m bench.run`); raw figures, one JSON line per measurement, in "
        "`results.jsonl` beside this file. Every comparison is run several times, alternating the variants "
        "(the order rotates each rep), and ratios are taken rep by rep, so a slow moment hits both sides.",
        "",
        f"- Started {machine['started']}, finished {machine['finished']}; Python {machine['python']}, "
        f"{machine['cpus']} CPUs, {machine['platform']}.",
        f"- Load average (1/5/15 min) at start {machine['load_at_start']['load1']}/{machine['load_at_start']['load5']}/"
        f"{machine['load_at_start']['load15']}, at end {machine['load_at_end']['load1']}/"
        f"{machine['load_at_end']['load5']}/{machine['load_at_end']['load15']}.",
    ]
    for rerun in machine.get("reruns", []):
        lines.append(f"- Re-run on their own: {', '.join(rerun['scenarios'])}, {rerun['started']} to {rerun['finished']} "
                     f"(load {rerun['load_at_start']['load1']} at start, {rerun['load_at_end']['load1']} at end).")
    if os.environ.get("BENCH_NOTE"):
        lines.append(f"- {os.environ['BENCH_NOTE']}")
    if failed:
        lines.append(f"- **Scenarios that failed:** {', '.join(failed)} (see the command's output).")
    lines += ["", "## Targets and ratios", "",
              "| scenario | ratio | median | range over reps | target | met |", "| --- | --- | --- | --- | --- | --- |"]
    for scenario, label, ratios, op, target in _pairs(records):
        spread = f"{_fmt(min(ratios))} – {_fmt(max(ratios))}" if len(ratios) > 1 else "–"
        lines.append(f"| {scenario} | {label} | {_fmt(median(ratios))} | {spread} | "
                     f"{f'{op} {target}' if op else ''} | {_met(median(ratios), op, target)} |")
    for scenario, title in TITLES.items():
        mine = [r for r in records if r["scenario"] == scenario]
        if not mine:
            continue
        loads = [r["load_before"]["load1"] for r in mine[:1]] + [r["load_after"]["load1"] for r in mine[:1]]
        lines += ["", f"## {title}", "", f"Load average (1 min) before / after: {loads[0]} / {loads[1]}.", "",
                  "| variant | metric | median | min | max | spread | reps | details |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        groups = {}
        for r in mine:
            groups.setdefault((r["variant"], r["metric"], r["unit"]), []).append(r)
        for (variant, metric, unit), rs in groups.items():
            values = [r["value"] for r in rs]
            mid = median(values)
            spread = f"{(max(values) - min(values)) / mid * 100:.0f}%" if mid and len(values) > 1 else "–"
            details = {k: v for k, v in rs[0].items() if k not in (
                "scenario", "variant", "rep", "metric", "value", "unit", "smoke", "load_before", "load_after", "at")}
            detail = ", ".join(f"{k}={v}" for k, v in details.items())
            lines.append(f"| {variant} | {metric} ({unit}) | {_fmt(mid)} | {_fmt(min(values))} | {_fmt(max(values))} | "
                         f"{spread} | {len(values)} | {detail} |")
    notes = Path(__file__).with_name("NOTES.md")
    if notes.exists() and not smoke:
        lines += ["", notes.read_text().strip()]
    path.write_text("\n".join(lines) + "\n")
