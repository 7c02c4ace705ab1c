"""Submissions graded per minute by `ol grade`, with --jobs 1 and --jobs 2, side by side in one run.

    python bench/grade_rate.py [--copies N]

The class is N copies of each example submission that ends on its own (correct and the three
pitfalls; the hanging one measures the deadline, not the grader, so it is left out), graded on
fresh cases from a fixed seed. Goal (issue 8): at least 20 a minute on this 2-core machine.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "submissions"
KINDS = ("correct", "s01-first-occurrence", "s07-draws-u-resample-only-on-rejection", "s13-releases-partial-block")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "grade_rate.json"))
    a = ap.parse_args()
    klass = Path(tempfile.mkdtemp(prefix="ol-class-"))
    for i in range(a.copies):
        for kind in KINDS:
            shutil.copytree(EXAMPLES / kind, klass / f"{kind}-{i}")
    n = a.copies * len(KINDS)
    rates = {}
    for jobs in (1, 2):
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), "--jobs", str(jobs), "--ref-deps",
                            "--seed", "12345", "--out", str(klass.parent / f"grades-{jobs}.csv")],
                           cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        elapsed = time.perf_counter() - start
        if r.returncode != 0:
            sys.exit(f"ol grade failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        rates[jobs] = {"seconds": elapsed, "per_minute": n / elapsed * 60}
    print(f"{n} submissions ({a.copies} copies of {len(KINDS)} examples), fresh cases seed 12345")
    print(f"{'jobs':>4} {'seconds':>8} {'per minute':>11} {'x jobs=1':>9}")
    for jobs, v in rates.items():
        print(f"{jobs:>4} {v['seconds']:8.1f} {v['per_minute']:11.1f} {v['per_minute'] / rates[1]['per_minute']:9.2f}")
    print(f"goal >= 20 a minute with --jobs 2: {'met' if rates[2]['per_minute'] >= 20 else 'NOT met'}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"submissions": n, "rates": rates}, indent=2) + "\n")
    shutil.rmtree(klass, ignore_errors=True)


if __name__ == "__main__":
    main()
