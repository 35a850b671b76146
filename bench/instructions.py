"""Instructions one Warrant run executes, counted by valgrind (how the fourth pass compared trees).

Timings on this shared machine move by up to 2x from one quarter of an hour to the next; an
instruction count does not, so two trees (or two commits) compare to within about 1% even with
other work running. The count is the difference between a process making `--runs` runs and one
making `--base` runs, divided by the difference, so that start-up and migrations cancel out.
Needs valgrind (Debian: `apt-get install valgrind`); each process takes a minute or two.

    .venv-bench/bin/python -m bench.instructions harness     # or: approval
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import djangoenv

ROOT = Path(__file__).resolve().parent.parent


def _instructions(what: str, runs: int) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               sys.executable, "-m", "bench.instructions", what, "--make", str(runs)]
    # A fixed hash seed: the same dict and set layouts in every process.
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if not found:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _make(what: str, runs: int) -> None:
    djangoenv.setup(Path(tempfile.mkdtemp(prefix="bench-instructions-")))
    djangoenv.prepare()
    from bench.s_embedded import _warrant

    once, check = _warrant(what == "approval")
    check(once())
    for _ in range(runs):
        once()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("harness", "approval"))
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--base", type=int, default=5)
    parser.add_argument("--make", type=int, help=argparse.SUPPRESS)  # internal: the process valgrind counts
    args = parser.parse_args()
    if args.make is not None:
        _make(args.what, args.make)
        return 0
    per_run = (_instructions(args.what, args.runs) - _instructions(args.what, args.base)) / (args.runs - args.base)
    print(f"{args.what}: {per_run / 1e6:.1f} million instructions per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
