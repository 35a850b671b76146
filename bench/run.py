"""`make bench`: every scenario, each in a process of its own, then bench/RESULTS.md.

    python -m bench.run                 # the full run: writes bench/RESULTS.md and bench/results.jsonl
    python -m bench.run --smoke --out D # each scenario once with tiny N (the test suite's smoke run)
    python -m bench.run --only engine,context

Scenarios 3 and 4 need PostgreSQL (--pg-url, a server where databases warrant_bench_* may be
created and dropped) and start their own redis-server on --redis-port.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import load_snapshot

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCENARIOS = ("embedded", "distributed", "api", "engine", "receipts", "context", "memory")  # embedded: 1 and 2

FULL = {"n": 100, "reps": 5, "dist_n": 100, "dist_reps": 3, "workers": (1, 2), "api_seconds": 8.0,
        "gunicorn_workers": 4, "engine_budget": 0.5, "engine_sizes": (10, 1_000, 10_000), "receipts": 100_000,
        "memory_marks": (200, 5_000)}
SMOKE = {"n": 1, "reps": 1, "dist_n": 2, "dist_reps": 1, "workers": (1,), "api_seconds": 0.3, "gunicorn_workers": 1,
         "engine_budget": 0.001, "engine_sizes": (10, 100), "receipts": 50, "memory_marks": (2, 4)}


def one(name: str, args, sizes: dict, workdir: Path) -> list[dict]:
    """Run one scenario in this process; its records."""
    if name in ("embedded", "harness", "approval"):
        from bench import s_embedded

        scenarios = ("harness", "approval") if name == "embedded" else (name,)
        return s_embedded.run(workdir=workdir, n=sizes["n"], reps=sizes["reps"], scenarios=scenarios)
    if name == "distributed":
        from bench import s_distributed

        return s_distributed.run(workdir=workdir, pg_url=args.pg_url, redis_port=args.redis_port, n=sizes["dist_n"],
                                 reps=sizes["dist_reps"], worker_counts=sizes["workers"])
    if name == "api":
        from bench import s_api

        return s_api.run(workdir=workdir, pg_url=args.pg_url, redis_port=args.redis_port + 1, port=args.api_port,
                         seconds=sizes["api_seconds"], reps=sizes["reps"], gunicorn_workers=sizes["gunicorn_workers"])
    if name == "engine":
        from bench import s_engine

        return s_engine.run(reps=sizes["reps"], budget_s=sizes["engine_budget"], sizes=sizes["engine_sizes"])
    if name == "receipts":
        from bench import s_receipts

        return s_receipts.run(workdir=workdir, n=sizes["receipts"], reps=sizes["reps"])
    if name == "context":
        from bench import djangoenv, s_context

        djangoenv.setup(workdir / "context")
        return s_context.run()
    if name == "template":
        from django.db import connections

        from bench import djangoenv

        djangoenv.setup(Path(os.environ["BENCH_SQLITE_TEMPLATE"]).parent)
        djangoenv.prepare()
        connections.close_all()
        return []
    if name == "memory":
        from bench import s_memory

        return s_memory.run(workdir=workdir, marks=sizes["memory_marks"])
    raise SystemExit(f"unknown scenario {name!r}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="each scenario once, tiny N")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--merge", action="store_true", help="keep the other scenarios' figures in --out")
    parser.add_argument("--report", action="store_true", help="only write RESULTS.md again from results.jsonl")
    parser.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md and results.jsonl go")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--redis-port", type=int, default=int(os.environ.get("BENCH_REDIS_PORT", "18401")))
    parser.add_argument("--api-port", type=int, default=int(os.environ.get("BENCH_API_PORT", "18410")))
    parser.add_argument("--scenario", help=argparse.SUPPRESS)  # internal: run one scenario here
    parser.add_argument("--jsonl", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else FULL

    if args.scenario:
        with tempfile.TemporaryDirectory(prefix=f"bench-{args.scenario}-") as workdir:
            before = load_snapshot()
            started = time.time()
            records = one(args.scenario, args, sizes, Path(workdir))
            after = load_snapshot()
        with args.jsonl.open("a") as out:
            for r in records:
                out.write(json.dumps(r | {"smoke": args.smoke, "load_before": before, "load_after": after,
                                          "at": started}) + "\n")
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    jsonl = args.out / "results.jsonl"
    if args.report:
        return _report(args, jsonl, None, [])
    only = args.only.split(",")
    kept = []
    if args.merge and jsonl.exists():  # re-run some scenarios, keep the others' figures
        names = {"embedded": {"harness", "approval"}}
        dropped = {s for name in only for s in names.get(name, {name})}
        kept = [line for line in jsonl.read_text().splitlines() if line.strip()
                and json.loads(line).get("scenario") not in dropped]
    jsonl.write_text("".join(line + "\n" for line in kept))
    tmp = tempfile.TemporaryDirectory(prefix="bench-")
    template = Path(tmp.name) / "template" / "warrant.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(ROOT), BENCH_SQLITE_TEMPLATE=str(template))
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    failed = []
    machine = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
               "load_at_start": load_snapshot(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    for name in ["template", *only]:
        started = time.monotonic()
        print(f"bench: {name} ...", flush=True)
        command = [sys.executable, "-m", "bench.run", "--scenario", name, "--jsonl", str(jsonl),
                   "--pg-url", args.pg_url, "--redis-port", str(args.redis_port), "--api-port", str(args.api_port)]
        if args.smoke:
            command.append("--smoke")
        done = subprocess.run(command, cwd=ROOT, env=env)
        print(f"bench: {name} {'ok' if done.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s",
              flush=True)
        if done.returncode:
            failed.append(name)
    tmp.cleanup()
    machine["load_at_end"] = load_snapshot()
    machine["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine["scenarios"] = only
    with jsonl.open("a") as out:
        out.write(json.dumps({"scenario": "_run", "machine": machine}) + "\n")
    return _report(args, jsonl, machine, failed)


def _report(args, jsonl: Path, machine: dict | None, failed: list[str]) -> int:
    lines = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    runs = [r["machine"] for r in lines if r.get("scenario") == "_run"]
    records = [r for r in lines if r.get("scenario") != "_run"]
    if runs:  # the first run's header, and when scenarios were re-run (--merge)
        machine = dict(runs[0], reruns=runs[1:])
    from bench.report import write

    write(args.out / "RESULTS.md", records, machine=machine, failed=failed, smoke=args.smoke)
    print(f"bench: wrote {args.out / 'RESULTS.md'} and {jsonl}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
