#!/usr/bin/env python3
"""Schemathesis against a live Warrant: the real schema, a real gunicorn, two personas.

    .venv/bin/python tests/fuzz/run_schemathesis.py        (or just tests/fuzz/run_schemathesis.py)

1. A fresh SQLite database with the demo, a second operator and tokens, served by gunicorn on a
   free loopback port (tests/fuzz/live_server.py).
2. `schemathesis run http://127.0.0.1:<port>/api/v1/schema/` (tests/fuzz/passes.py), twice:
     - as `operator`, with `operator2` as its WFC peer, so the `object_level_authorization` check
       replays the operator's reads as operator2;
     - as governance admin `admin` (after the operator pass: the admin pass rewrites policies,
       roles and grants).
   All 14 checks (`[checks] enabled = true`), every phase (examples, coverage, fuzzing, stateful), at most
   `--max-examples` cases per operation per round and a time budget per pass. Schemathesis is told
   only what it cannot know from the schema (tests/fuzz/schemathesis_config.py, tests/fuzz/hooks.py
   and the rules no schema can state in tests/fuzz/rules.py), each for a stated reason.
3. tests/fuzz/peer_isolation.py between the two passes: operator2 gets 404 on operator's runs,
   events, receipts, verifications, cancels and approval decisions (writes included, which
   Schemathesis does not replay as a peer).
4. Reports (JUnit XML, JSON, NDJSON events, server logs) in the results directory
   (default a new var/fuzz-results/<time>-<pid>/, linked as var/fuzz-results/latest), counts
   printed, server stopped.

Exit status 0 only when no pass found a failure of any check, no pass errored, the server
answered no request with a 5xx and the peer isolation check passed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # run as a script: the tests package lives at the repository root
    sys.path.insert(0, str(REPO))

from tests.fuzz.live_server import Server, free_port, prepare_database, server_env  # noqa: E402
from tests.fuzz.passes import print_pass, run_pass  # noqa: E402
from tests.fuzz.results import results_dir, server_census  # noqa: E402


def _reexec_in_venv() -> None:
    """Run under the project's virtualenv when started with another interpreter."""
    venv_python = REPO / ".venv" / "bin" / "python"
    try:
        import django  # noqa: F401
        import schemathesis  # noqa: F401
    except ImportError:
        if venv_python.exists() and Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
            os.execv(str(venv_python), [str(venv_python), __file__, *sys.argv[1:]])
        raise SystemExit("schemathesis is not installed: .venv/bin/pip install -r requirements-test.txt")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The run `make test` makes: every operation, both personas and the peer isolation check, with
    # fewer generated cases per operation than a long run would (FUZZ_MAX_EXAMPLES=50 and budgets of
    # 600 s, say). Every pass has run all 57 operations through the coverage phase, which is not cut
    # by --max-examples, well inside these budgets; they stop a pass that would go on much longer.
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "10")),
                        help="test cases per operation per fuzzing round (default 10)")
    parser.add_argument("--operator-time", type=int, default=int(os.environ.get("FUZZ_OPERATOR_SECONDS", "120")),
                        help="time budget of the operator pass in seconds (default 120)")
    parser.add_argument("--admin-time", type=int, default=int(os.environ.get("FUZZ_ADMIN_SECONDS", "100")),
                        help="time budget of the admin pass in seconds (default 100)")
    # One worker: with two threads, CPython 3.11's AST builder (used while Schemathesis generates)
    # now and then raised "SystemError: AST constructor recursion depth mismatch" (CPython
    # gh-106905, a thread-state bug), an error of the tool and not of the API.
    parser.add_argument("--workers", type=int, default=int(os.environ.get("FUZZ_WORKERS", "1")))
    parser.add_argument("--seed", type=int, default=int(os.environ["FUZZ_SEED"]) if os.environ.get("FUZZ_SEED") else None)
    parser.add_argument("--results-dir", type=Path, default=os.environ.get("FUZZ_RESULTS_DIR"),
                        help="where the reports go (default: a new var/fuzz-results/<time>-<pid>/, linked"
                             " from var/fuzz-results/latest)")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary database directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="stream Schemathesis' output")
    args = parser.parse_args(argv)

    started = time.monotonic()
    results = results_dir(args.results_dir)
    tmp = Path(tempfile.mkdtemp(prefix="warrant-fuzz-"))
    env = server_env(tmp)
    print(f"database and config: {tmp}\nresults: {results}", flush=True)
    prepared = prepare_database(env)
    tokens, tools, sources = prepared["tokens"], prepared["tools"], prepared["tool_sources"]
    print(f"demo loaded, operator2 created, tokens for {', '.join(tokens)} ({time.monotonic() - started:.0f}s)")

    port = free_port()
    server = Server(env, results, port)
    base = f"http://127.0.0.1:{port}"
    passes: list[dict] = []
    peer_failures: list[str] = []
    peer_checks = 0
    try:
        server.wait_ready()
        print(f"gunicorn serving on {base}", flush=True)
        passes.append(run_pass(base=base, persona="operator", tokens=tokens, peers=["operator", "operator2"],
                               tools=tools, tool_sources=sources, tmp=tmp, results=results, args=args))
        print_pass(passes[-1])

        from tests.fuzz import peer_isolation  # httpx: only once in the venv

        try:
            report = peer_isolation.check(f"{base}/api/v1", tokens["operator"], tokens["operator2"])
            peer_checks, peer_failures = report.checks, report.failures
        except Exception as exc:  # the companion could not even set up its objects
            peer_failures = [f"peer isolation could not run: {exc!r}"]
        print(f"\n=== peer isolation (operator's objects, operator2's token): {peer_checks} checks,"
              f" {len(peer_failures)} failures ===")
        for failure in peer_failures:
            print(f"    FAIL {failure}")

        passes.append(run_pass(base=base, persona="admin", tokens=tokens, peers=["admin"],
                               tools=tools, tool_sources=sources, tmp=tmp, results=results, args=args))
        print_pass(passes[-1])
    finally:
        server.stop()
        if not args.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    per_persona, server_errors = server_census(server.access_log, tokens)
    print("\n=== summary ===")
    print("requests served: " + ", ".join(f"{name} {count}" for name, count in per_persona.most_common()))
    print("operations tested: " + ", ".join(f"{p['persona']} {p.get('operations_tested', 0)}" for p in passes))
    print("test cases: " + ", ".join(f"{p['persona']} {p.get('test_cases', 0)}" for p in passes))
    by_check: Counter = Counter()
    for summary in passes:
        for failure in summary.get("failures", []):
            by_check[f"{failure['code']} {failure['check']}"] += failure["count"]
    print("failures by check: " + (", ".join(f"{name} {count}" for name, count in sorted(by_check.items()))
                                   or "none"))
    print(f"5xx answered by the server: {len(server_errors)}")
    for line in sorted(set(server_errors))[:20]:
        print(f"    {line}")
    if server_errors:
        print(f"    tracebacks: {results / 'server-output.log'}")
    print(f"peer isolation failures: {len(peer_failures)}")
    print(f"reports: {results}")
    print(f"total time: {time.monotonic() - started:.0f}s")

    ok = (
        all(p.get("exit_code") == 0 and not p.get("missing_report") and not p.get("failures") and not p.get("errors")
            for p in passes)
        and len(passes) == 2
        and not server_errors
        and not peer_failures
    )
    print("RESULT: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    _reexec_in_venv()
    # A SIGTERM (a timeout, `kill`) unwinds like Ctrl-C, so the server and Schemathesis are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(main())
