"""python -m warrant_verify BUNDLE [--public-key FILE] [--witness FILE]

Exit 0 when the bundle is intact (one summary line); exit 1 with one line per failure,
"FILE: RECORD: REASON"; exit 2 for a usage error.
"""

import argparse
import sys
from pathlib import Path

from .archive import BundleError, read_bundle
from .bundle import verify_bundle
from .chain import default_workers
from .keys import KeySetError, load_key_set


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warrant_verify",
                                     description="Verify a Warrant evidence bundle offline.")
    parser.add_argument("path", help="a bundle directory or zip")
    parser.add_argument("--public-key", metavar="FILE",
                        help="the signing key(s) you obtained out of band: a PEM public key or a keys.json")
    parser.add_argument("--witness", metavar="FILE", help="the witness's checkpoint file (JSON lines)")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="processes for signature checks (default: CPUs, at most 4)")
    args = parser.parse_args(argv)
    path = Path(args.path)
    trusted, trusted_from = None, ""
    if args.public_key:
        try:
            trusted = load_key_set(args.public_key)
        except (OSError, KeySetError) as exc:
            print(f"{args.public_key}: file: {exc}")
            return 1
        trusted_from = f"--public-key {args.public_key}"
    witness = None
    if args.witness:
        try:
            witness = Path(args.witness).read_bytes()
        except OSError as exc:
            print(f"{args.witness}: file: cannot be read ({exc.strerror})")
            return 1
    try:
        files = read_bundle(path)
    except BundleError as exc:
        print(f"{path.name}: bundle: {exc}")
        return 1
    except OSError as exc:
        print(f"{path.name}: bundle: cannot be read ({exc.strerror})")
        return 1
    report = verify_bundle(files, trusted=trusted, trusted_from=trusted_from, witness=witness,
                           witness_name=Path(args.witness).name if args.witness else "witness",
                           workers=max(1, args.workers))
    if report.failures:
        for failure in report.failures:
            print(failure)
        print(f"{len(report.failures)} failure(s): {path.name} is NOT intact", file=sys.stderr)
        return 1
    print(f"intact: {path.name}: " + "; ".join(report.notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
