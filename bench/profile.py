"""Profile Warrant's side of a scenario with pyinstrument (how RESULTS.md's findings were made).

    .venv-bench/bin/python -m bench.profile harness   # or: approval, receipts
"""

import argparse
import sys
import tempfile
from pathlib import Path

from pyinstrument import Profiler

from bench import djangoenv


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("harness", "approval", "receipts"))
    parser.add_argument("-n", type=int, default=30)
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
        check(once())

        def work():
            for _ in range(args.n):
                once()

    profiler = Profiler(interval=0.0005)
    profiler.start()
    work()
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
