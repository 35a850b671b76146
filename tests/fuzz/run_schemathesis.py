#!/usr/bin/env python3
"""Schemathesis against a live Warrant: the real schema, a real gunicorn, two personas.

    .venv/bin/python tests/fuzz/run_schemathesis.py        (or just tests/fuzz/run_schemathesis.py)

1. A fresh SQLite database with the demo, a second operator, tokens, a signed-in session and the
   desk's objects, and two copies of it; each served by its own gunicorn on a free loopback port
   (tests/fuzz/live_server.py).
2. `schemathesis run http://127.0.0.1:<port>/api/v1/schema/` (tests/fuzz/passes.py) as four personas
   in three lanes at once, each lane against its own server:
     - as `operator`, with `operator2` as its WFC peer, so the `object_level_authorization` check
       replays the operator's reads as operator2;
     - as governance admin `admin`, whose pass rewrites policies, roles and grants (on its own copy
       of the database, so the operator's pass never meets them);
     - the desk: the operations no other pass gets past their refusal (DESK_OPERATIONS), one persona
       after the other on the third copy: `approver` (secops, with a token) grants standing
       approvals and decides the parked approvals; `compliance`, signed in with a session (a token
       cannot issue tokens), issues and revokes its tokens and records its reviews.
   All 14 checks (`[checks] enabled = true`) and every phase: examples and coverage (at most
   `--coverage-time` seconds), then fuzzing (`--max-examples` cases per operation) and stateful
   (`--stateful-examples` scenarios of linked requests), each once unless a time budget is given.
   An operation the role matrix (tests/api/role_matrix.py) refuses the persona with 403 gets only
   its examples and a few fuzzing cases, enough to show the refusal (tests/fuzz/schemathesis_config.py).
   Schemathesis is told only what it cannot know from the schema (tests/fuzz/schemathesis_config.py,
   tests/fuzz/hooks.py and the rules no schema can state in tests/fuzz/rules.py), each for a
   stated reason.
3. tests/fuzz/peer_isolation.py after the operator's pass, on its server: operator2 gets 404 on
   operator's runs, events, receipts, verifications, cancels and approval decisions (writes
   included, which Schemathesis does not replay as a peer).
4. Reports (JUnit XML, JSON, NDJSON events, server logs) in the results directory
   (default a new var/fuzz-results/<time>-<pid>/, linked as var/fuzz-results/latest), counts
   printed (requests per phase, stateful links tried and followed), servers stopped.

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
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # run as a script: the tests package lives at the repository root
    sys.path.insert(0, str(REPO))

from tests.fuzz.live_server import Server, copy_server_env, free_port, prepare_database, server_env  # noqa: E402
from tests.fuzz.pass_report import print_pass  # noqa: E402
from tests.fuzz.passes import run_pass, stop_all  # noqa: E402
from tests.fuzz.results import results_dir, server_census  # noqa: E402

# Persona -> the identities its pass authenticates as (the first is its own; the others are
# object_level_authorization peers, who must not reach its objects).
PEERS = {"operator": ["operator", "operator2"], "admin": ["admin"], "approver": ["approver"],
         "compliance": ["compliance"]}
# Lane -> its personas, one pass after the other on the lane's own server (a copy of the database).
LANES = {"operator": ["operator"], "admin": ["admin"], "desk": ["approver", "compliance"]}
# The desk's passes are limited to what the role matrix lets only their persona do (the operator's and
# the admin's passes meet its 403), and the reads that lead to it (their ids feed the stateful phase).
DESK_OPERATIONS = {
    "approver": [("POST", "standing-approvals/"), ("GET", "standing-approvals/"),
                 ("GET", "standing-approvals/{standing_id}/"), ("POST", "standing-approvals/{standing_id}/revoke/"),
                 ("GET", "approvals/{approval_id}/"), ("POST", "approvals/{approval_id}/approve/"),
                 ("POST", "approvals/{approval_id}/deny/")],
    "compliance": [("POST", "tokens/"), ("GET", "tokens/"), ("GET", "tokens/{public_id}/"),
                   ("DELETE", "tokens/{public_id}/"), ("GET", "review/items/{item_id}/"),
                   ("POST", "review/items/{item_id}/records/")],
}


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



def _lane(*, personas: list[str], base: str, prepared: dict, credentials: dict[str, dict[str, str]], tmp: Path,
          results: Path, args: argparse.Namespace, outcome: dict) -> None:
    """A lane's passes on its own server, one after the other (and, for the operator, the peer isolation
    check after its pass)."""
    for persona in personas:
        try:
            outcome[persona] = run_pass(
                base=base, persona=persona, credentials=credentials, peers=PEERS[persona], tools=prepared["tools"],
                tool_sources=prepared["tool_sources"], forbidden=[tuple(row) for row in prepared["forbidden"][persona]],
                tmp=tmp, results=results, args=args, desk=prepared, only=DESK_OPERATIONS.get(persona),
                budget={"operator": args.operator_time, "admin": args.admin_time}.get(persona, args.desk_time))
        except Exception as exc:  # reported as a pass without a report, so the run fails
            outcome[persona] = {"persona": persona, "missing_report": True, "exit_code": None, "error": repr(exc)}
            print(f"the {persona} pass could not run: {exc!r}", flush=True)
            continue
        if persona == "operator":
            _peer_isolation(base, prepared["tokens"], outcome)


def _peer_isolation(base: str, tokens: dict[str, str], outcome: dict) -> None:
    from tests.fuzz import peer_isolation  # httpx: only once in the venv

    try:
        report = peer_isolation.check(f"{base}/api/v1", tokens["operator"], tokens["operator2"])
        outcome["peer isolation"] = (report.checks, report.failures)
    except Exception as exc:  # the companion could not even set up its objects
        outcome["peer isolation"] = (0, [f"peer isolation could not run: {exc!r}"])


def _seconds(name: str) -> int | None:
    return int(os.environ[name]) if os.environ.get(name) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The run `make test` makes: every operation through every phase, both personas and the peer
    # isolation check. The coverage phase alone would send thousands of cases a persona (6,149 as
    # operator, 4,276 of them to operations it may not call, refused before any validation, before
    # those were left out of it), so it has a cap; fuzzing and
    # stateful run once and end when done, so a loaded machine makes them slower rather than
    # thinner. A longer run raises the numbers (FUZZ_COVERAGE_SECONDS=600, FUZZ_MAX_EXAMPLES=50,
    # FUZZ_STATEFUL_EXAMPLES=200) or gives budgets (FUZZ_OPERATOR_SECONDS=600), within which
    # Schemathesis repeats the fuzzing and stateful phases.
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "10")),
                        help="generated test cases per operation in the fuzzing phase (default 10)")
    parser.add_argument("--coverage-time", type=int, default=int(os.environ.get("FUZZ_COVERAGE_SECONDS", "45")),
                        help="time cap of each pass's coverage phase in seconds (default 45)")
    parser.add_argument("--stateful-examples", type=int, default=int(os.environ.get("FUZZ_STATEFUL_EXAMPLES", "30")),
                        help="scenarios of linked requests in the stateful phase (default 30)")
    parser.add_argument("--operator-time", type=int, default=_seconds("FUZZ_OPERATOR_SECONDS"),
                        help="time budget of the operator pass in seconds (default none: each phase once)")
    parser.add_argument("--admin-time", type=int, default=_seconds("FUZZ_ADMIN_SECONDS"),
                        help="time budget of the admin pass in seconds (default none: each phase once)")
    parser.add_argument("--desk-time", type=int, default=_seconds("FUZZ_DESK_SECONDS"),
                        help="time budget of each desk pass (approver, compliance) in seconds (default none)")
    # One worker: with two threads, CPython 3.11's AST builder (used while Schemathesis generates)
    # now and then raised "SystemError: AST constructor recursion depth mismatch" (CPython
    # gh-106905, a thread-state bug), an error of the tool and not of the API.
    parser.add_argument("--workers", type=int, default=int(os.environ.get("FUZZ_WORKERS", "1")))
    parser.add_argument("--seed", type=int, default=int(os.environ["FUZZ_SEED"]) if os.environ.get("FUZZ_SEED") else None)
    parser.add_argument("--results-dir", type=Path, default=os.environ.get("FUZZ_RESULTS_DIR"),
                        help="where the reports go (default: a new var/fuzz-results/<time>-<pid>/, linked"
                             " from var/fuzz-results/latest)")
    parser.add_argument("--lanes", default=",".join(LANES),
                        help=f"the lanes to run, comma-separated (default all: {','.join(LANES)})")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary database directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="stream Schemathesis' output")
    args = parser.parse_args(argv)
    asked = [lane for lane in args.lanes.split(",") if lane] if args.lanes else list(LANES)
    if unknown := sorted(set(asked) - set(LANES)):
        parser.error(f"unknown lane(s): {', '.join(unknown)}")
    lanes = {lane: LANES[lane] for lane in asked}

    started = time.monotonic()
    results = results_dir(args.results_dir, [*PEERS, *LANES])
    tmp = Path(tempfile.mkdtemp(prefix="warrant-fuzz-"))
    envs = {"operator": server_env(tmp / "operator")}
    print(f"databases and config: {tmp}\nresults: {results}", flush=True)
    prepared = prepare_database(envs["operator"], list(PEERS))
    tokens, sessions = prepared["tokens"], prepared["sessions"]
    credentials = {name: {"Authorization": f"Token {key}"} for name, key in tokens.items()} | {
        name: {"Cookie": "; ".join(f"{cookie}={value}" for cookie, value in session["cookies"].items()),
               "X-CSRFToken": session["csrf"]} for name, session in sessions.items()}
    # The admin pass rewrites policies, roles and grants, the desk's decides approvals: each on a server
    # of its own, they run beside the operator pass and the peer isolation check without changing what
    # they meet.
    for lane in lanes:
        if lane != "operator":
            envs[lane] = copy_server_env(envs["operator"], tmp / lane)
    if "operator" not in lanes:
        del envs["operator"]
    print(f"demo loaded, operator2 created, tokens for {', '.join(tokens)}, sessions for {', '.join(sessions)},"
          f" {len(prepared['review_items'])} review items and {len(prepared['approvals'])} approvals for the desk"
          f" ({time.monotonic() - started:.0f}s)")

    servers: dict[str, Server] = {}
    outcome: dict = {}
    try:
        for lane, env in envs.items():
            (results / lane).mkdir(parents=True, exist_ok=True)
            servers[lane] = Server(env, results / lane, free_port())
        for lane, server in servers.items():
            server.wait_ready()
            print(f"gunicorn for {lane} serving on {server.base}", flush=True)
        threads = [threading.Thread(target=_lane, daemon=True, kwargs=dict(
            personas=personas, base=servers[lane].base, prepared=prepared, credentials=credentials, tmp=tmp,
            results=results, args=args, outcome=outcome)) for lane, personas in lanes.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop_all()
        for server in servers.values():
            server.stop()
        if not args.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    expected = [persona for personas in lanes.values() for persona in personas]
    passes = [outcome[persona] for persona in expected if persona in outcome]
    for summary in passes:
        print()
        print_pass(summary)
    peer_checks, peer_failures = outcome.get("peer isolation", (0, ["peer isolation did not run"] if "operator" in lanes
                                                                else []))
    print(f"\n=== peer isolation (operator's objects, operator2's token): {peer_checks} checks,"
          f" {len(peer_failures)} failures ===")
    for failure in peer_failures:
        print(f"    FAIL {failure}")

    per_persona: Counter = Counter()
    server_errors: list[str] = []
    for lane, server in servers.items():
        requests, errors = server_census(server.access_log, credentials)
        per_persona.update(requests)
        server_errors += [f"{line} ({lane}'s server)" for line in errors]
    print("\n=== summary ===")
    print("requests served: " + ", ".join(f"{name} {count}" for name, count in per_persona.most_common()))
    print("operations tested: " + ", ".join(f"{p['persona']} {p.get('operations_tested', 0)}" for p in passes))
    print("test cases: " + ", ".join(f"{p['persona']} {p.get('test_cases', 0)}" for p in passes))
    print("stateful links tried: " + ", ".join(f"{p['persona']} {p.get('links_tried', 0)} of {p.get('links_total', 0)}"
                                               f" ({p.get('links_applied', 0)} followed)" for p in passes))
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
        print(f"    tracebacks: {results}/<lane>/server-output.log")
    print(f"peer isolation failures: {len(peer_failures)}")
    print(f"reports: {results}")
    print(f"total time: {time.monotonic() - started:.0f}s")

    ok = (
        all(p.get("exit_code") == 0 and not p.get("missing_report") and not p.get("failures") and not p.get("errors")
            for p in passes)
        and len(passes) == len(expected)
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
