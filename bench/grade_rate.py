"""Submissions graded per minute by `ol grade`, with --jobs 1 and --jobs 2, side by side in one run.

    python bench/grade_rate.py [--copies N] [--out F.json] [--quick]

The class is N copies of each example submission that ends on its own (correct and the three
pitfalls; the hanging one measures the deadline, not the grader, so it is left out), graded on
fresh cases from a fixed seed. Every grade is checked against examples/submissions/expected.json
(the tests each example must not pass, and how): a grader that errs fast is not a fast grader, so
a wrong grade ends the bench with exit 1.
--quick: one copy of the correct example (seconds).
Goal (issue 8): at least 20 a minute on this 2-core machine.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
EXAMPLES = REPO / "examples" / "submissions"
EXPECTED = EXAMPLES / "expected.json"  # each example's tests that must not pass, with their outcome
CHAPTER = "L10.8"  # the chapter graded
# every example that ends on its own: the correct one and the three pitfalls
KINDS = ("correct", "s01-first-occurrence", "s07-draws-u-resample-only-on-rejection", "s13-releases-partial-block")
QUICK_KINDS = ("correct",)  # the smoke run: one submission, graded end to end
COPIES = 3  # copies of each example: 12 submissions, enough for --jobs 2 to keep both cores busy
JOBS = (1, 2)  # serial, then both cores of the machine the goal is set for
SEED = "12345"  # the fresh cases' seed: the same class regrades identically
GOAL_PER_MINUTE = 20  # issue 8, with --jobs 2


def make_class(into: Path, kinds: tuple[str, ...], copies: int) -> list[str]:
    """Copy `copies` of each example into `into`; returns the submissions' names."""
    names = []
    for i in range(copies):
        for kind in kinds:
            shutil.copytree(EXAMPLES / kind, into / f"{kind}-{i}")
            names.append(f"{kind}-{i}")
    return names


def grade_once(klass: Path, jobs: int, out_csv: Path) -> float:
    """Seconds `ol grade` takes on the class; a failing run ends the bench with its output."""
    cmd = [sys.executable, "-m", "harness.cli", "grade", CHAPTER, str(klass), "--jobs", str(jobs), "--ref-deps",
           "--seed", SEED, "--out", str(out_csv)]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"ol grade failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return elapsed


def wrong_grades(out_csv: Path, names: list[str]) -> list[str]:
    """Each graded submission's tests not passed, against expected.json; returns the differences."""
    doc = json.loads(EXPECTED.read_text())
    expected, tests = doc["submissions"], doc["tests"]
    rows = {r["submission"]: r for r in csv.DictReader(out_csv.open())}
    problems = [f"{out_csv.name}: {n} was not graded" for n in names if n not in rows]
    for name, row in rows.items():
        kind = name.rsplit("-", 1)[0]
        got = {t: row.get(t) for t in tests if row.get(t) != "pass"}
        if got != expected[kind]["must_fail"]:
            problems.append(f"{out_csv.name}: {name} did not pass {got}, expected {expected[kind]['must_fail']}")
    return problems


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=COPIES, help=f"copies of each example (default {COPIES})")
    add_common(ap, "grade_rate", f"1 copy of {', '.join(QUICK_KINDS)}")
    a = ap.parse_args()
    a.kinds = QUICK_KINDS if a.quick else KINDS
    if a.quick:
        a.copies = 1
    if a.copies < 1:
        ap.error("--copies must be >= 1")
    a.out = out_path(a, "grade_rate")
    return a


def main() -> int:
    a = parse_args()
    rates, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="ol-grade-rate-") as tmp:
        klass = Path(tmp) / "class"
        names = make_class(klass, a.kinds, a.copies)
        for jobs in JOBS:
            out_csv = Path(tmp) / f"grades-{jobs}.csv"
            elapsed = grade_once(klass, jobs, out_csv)
            problems += wrong_grades(out_csv, names)
            rates[jobs] = {"seconds": elapsed, "per_minute": len(names) / elapsed * 60}
    print(f"{len(names)} submissions ({a.copies} copies of {len(a.kinds)} examples), fresh cases seed {SEED}")
    print(f"{'jobs':>4} {'seconds':>8} {'per minute':>11} {'x jobs=1':>9}")
    for jobs, v in rates.items():
        print(f"{jobs:>4} {v['seconds']:8.1f} {v['per_minute']:11.1f} {v['per_minute'] / rates[1]['per_minute']:9.2f}")
    print(f"goal >= {GOAL_PER_MINUTE} a minute with --jobs 2: {'met' if rates[2]['per_minute'] >= GOAL_PER_MINUTE else 'NOT met'}")
    write_figures(a.out, {"submissions": len(names), "kinds": list(a.kinds), "copies": a.copies, "quick": a.quick,
                          "rates": rates, "problems": problems})
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
