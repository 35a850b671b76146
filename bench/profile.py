"""Profile Warrant's side of a scenario (how RESULTS.md's and NOTES.md's findings were made).

    .venv-bench/bin/python -m bench.profile harness            # pyinstrument; or: approval, receipts
    .venv-bench/bin/python -m bench.profile harness --cpu -n 200
        # CPU ms and wall ms per run over n runs in one process, and one run's statements by kind
    .venv-bench/bin/python -m bench.profile harness --cprofile var/harness.prof -n 200
        # cProfile's stats of n runs, for pstats (sort by cumulative or tottime)
"""

import argparse
import cProfile
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import djangoenv


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("harness", "approval", "receipts"))
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--cpu", action="store_true", help="CPU and wall ms per run, statements per run")
    parser.add_argument("--cprofile", type=Path, help="write cProfile's stats of the n runs here")
    args = parser.parse_args()
    djangoenv.setup(Path(tempfile.mkdtemp(prefix="bench-profile-")))
    djangoenv.prepare()
    if args.what == "receipts":
        from bench.s_receipts import _build_chain
        from runs.receipts import receipt_verify_chain

        _build_chain(args.n * 100)
        work = receipt_verify_chain
    else:
        from bench.s_embedded import _warrant

        once, check = _warrant(args.what == "approval")
        for _ in range(5):  # warm: the freeze and the remembered checks are kept from the first run on
            check(once())
        if args.cpu:
            print(_statements(once))

        def work():
            for _ in range(args.n):
                once()

    if args.cpu or args.cprofile:
        profile = cProfile.Profile() if args.cprofile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        work()
        if profile:
            profile.disable()
            profile.dump_stats(args.cprofile)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"{args.what}: {cpu / args.n * 1000:.1f} ms CPU, {wall / args.n * 1000:.1f} ms wall a run over {args.n}"
              + (f" (under cProfile: {args.cprofile})" if profile else ""))
        return 0
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    work()
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False))
    return 0


def _statements(once) -> str:
    """One run's statements, counted as bench.s_embedded counts them, and by their first word."""
    from bench.s_embedded import _counted, warrant_statements

    seen = warrant_statements(once)
    counts = _counted(seen)
    kinds = Counter(sql.lstrip().split(None, 1)[0].upper() for sql in seen)
    return (f"{counts['statements_per_run']} statements, {counts['transactions_per_run']} transactions a run: "
            + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common()))


if __name__ == "__main__":
    sys.exit(main())
