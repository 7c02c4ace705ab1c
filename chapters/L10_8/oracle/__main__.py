"""`python -m chapters.L10_8.oracle [--check] [--out PATH] [--seed N]`, run from the repository root."""

import argparse
import json
import sys
import time

from harness.pack import pristine

from . import __doc__ as PACKAGE_DOC
from .common import MASTER_SEED
from .document import DEFAULT_OUT, check, tag_counts, write


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chapters.L10_8.oracle", description=PACKAGE_DOC.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare PATH with a fresh build; exit 1 on a difference")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="the fixture path (default: %(default)s)")
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=None,
                    help=f"master seed (default {MASTER_SEED}; with --check: the file's own)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.check:
        msg = check(args.out, pristine("L10.8"), args.seed)
        if msg:
            print(msg, file=sys.stderr)
            return 1
        print(f"{args.out}: identical to a fresh build ({time.perf_counter() - t0:.2f} s)")
        return 0
    data = write(args.out, pristine("L10.8"), MASTER_SEED if args.seed is None else args.seed)
    counts = tag_counts(json.loads(data))
    shows = ", ".join(f"{t}={counts.get(t, 0)}" for t in sorted(counts) if t.startswith("shows:"))
    print(f"wrote {args.out}: {len(data)} bytes in {time.perf_counter() - t0:.2f} s; {shows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
