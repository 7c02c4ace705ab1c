"""bench/grade_rate.py's cluster path and resume figure (not a bench itself: CI runs bench/[!_]*.py).

- `Loopback` (tests/harness/loopback_kit.py): the cluster each class is graded on through `ol grade --scheduler`, a
  real `dask scheduler` and `dask worker --nthreads 1` processes, started before and stopped after the
  timed runs, as an existing cluster would be.
- `overhead`: what Dask adds per submission, against `--jobs 1` (one judge at a time, like one worker):
  the time outside the judges (a run's seconds less the sum of its judges' wall_s: process start,
  fresh cases, packing, transport) on the cluster less the same on the local default, per submission;
  as a share of the median submission's judge time. This nets out the judges' own run-to-run noise.
- `resume_skip`: a class of RESUME_N bare uploads whose ledger already holds each graded with the
  run's key, then the plain `ol grade` command run once untimed (the end of the run that graded them: it
  writes the class's similarity and pages, which a finished run leaves; its seconds are `first_s`), then
  the same command timed as it skips them all, reusing the similarity and every page (none rewritten). The ledger is written
  through harness.grading.ledger.Ledger.record (what a grading run writes with), each entry a copy of a real
  report graded earlier in the bench under that submission's own key: grading 100 for real would
  take the bench 10 minutes and measure grading, not skipping.
"""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RESUME_N = 100
RESUME_GOAL_S = 5.0
RESUME_DEADLINE_S = 300  # a resume that grades instead of skipping is stopped, and the bench says so
SCALING_GOAL = 1.8  # 2 workers' rate against 1 worker's
OVERHEAD_GOAL = 0.05  # Dask's per-submission overhead against a submission's time


def outside_judges(run: dict) -> float:
    """Seconds of a run not spent inside a judge, per submission (the run is serial: one judge at a time)."""
    return (run["seconds"] - sum(run["wall_s"].values())) / len(run["wall_s"])


def overhead(local1: dict, dask1: dict) -> dict:
    per_sub = outside_judges(dask1) - outside_judges(local1)
    median = dask1["wall_median_s"]
    raw = (dask1["seconds"] - local1["seconds"]) / len(dask1["wall_s"])
    return {"per_submission_s": per_sub, "share_of_median": per_sub / median, "raw_per_submission_s": raw,
            "raw_share": raw / (local1["seconds"] / len(local1["wall_s"])), "median_submission_s": median}


def resume_skip(chapter, tmp: Path, graded_csv: Path, seed: str, make_upload, count: int = RESUME_N) -> dict:
    """Time `ol grade` skipping `count` (RESUME_N, the goal's) submissions the ledger holds graded; each entry a real report
    (the first graded row of `graded_csv`'s ledger) under that submission's own key. Returns figures and problems."""
    from harness.grading.ledger import Ledger, default_results_dir, read_entry
    from harness.grading.parcel import digest
    from harness.subjects.version import version_of

    first = next(r["submission"] for r in csv.DictReader(graded_csv.open()) if r["status"] == "graded")
    source = read_entry(default_results_dir(graded_csv), first)
    klass, out_csv = tmp / "class-resume", tmp / "grades-resume.csv"
    results = default_results_dir(out_csv)
    results.mkdir(parents=True)
    names = [f"student-{i:03d}" for i in range(count)]
    for i, name in enumerate(names):
        make_upload(klass / name, i)
    ledger = Ledger(chapter, names, out_csv, results, int(seed), True, version_of(chapter), "bwrap")
    if source is None:
        return {"seconds": None, "problems": [f"no readable ledger entry of {first} beside {graded_csv}"]}
    report, wall, _ = source
    for name in names:
        ledger.record(report.but(submission=name), wall, digest(klass / name), "bench")
    cmd = [sys.executable, "-m", "harness.cli", "grade", chapter.chapter, str(klass), "--ref-deps", "--out", str(out_csv)]
    first = _run(cmd)  # the run that finishes the grading: the class's similarity and pages, as a completed run leaves them
    if isinstance(first, str):
        return {"seconds": None, "first_s": None, "problems": [first]}
    before = {p.name: p.stat().st_mtime_ns for p in results.iterdir()}
    again = _run(cmd)  # timed: the resumed run
    if isinstance(again, str):
        return {"seconds": None, "first_s": first[1], "problems": [again]}
    r, seconds = again
    problems = []
    if r.returncode != 0 or f"{count} of {count} submissions already graded" not in r.stderr:
        problems.append(f"the resumed run did not skip all {count} (exit {r.returncode}): {r.stderr[-1500:]}")
    rows = list(csv.DictReader(out_csv.open()))
    if len(rows) != count:
        problems.append(f"the resumed run's CSV has {len(rows)} rows, not {count}")
    rewritten = [n for n, t in before.items() if (results / n).stat().st_mtime_ns != t]
    entries = [n for n in rewritten if n.endswith(".json") and not n.startswith(".") and n != "summary.json"]
    if entries:
        problems.append(f"the resumed run rewrote {len(entries)} ledger entries it should have skipped")
    derived = [n for n in rewritten if n.endswith(".html") or n.startswith((".similarity", ".pages", ".validated"))]
    if derived:  # nothing changed: the similarity, every page and the validated digests are kept as they are (issue 28)
        problems.append(f"the resumed run rewrote {len(derived)} pages or similarity files though nothing changed: "
                        f"{', '.join(derived[:5])}")
    return {"seconds": seconds, "first_s": first[1], "submissions": count, "problems": problems}


def _run(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float] | str:
    """The command's result and seconds, or why it did not finish."""
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=RESUME_DEADLINE_S,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        return (f"the resumed run did not finish in {RESUME_DEADLINE_S} s: it graded instead of skipping (did the harness "
                "change during the bench?)")
    return r, time.perf_counter() - start
