"""The class report of a synthetic class: how long `ol report` takes and how big its page is, beside the goals.

    python bench/report_build.py [--submissions N] [--out F.json] [--quick]

A ledger of N submissions (default 600) is written by harness.grading.ledger itself, each a report of the chapter's
16 tests with failures, messages (a differing case, a timeout's call) and pitfall hints spread over the class,
and wall times from 2 to 40 s; then `ol report L10.8 DIR` runs as a fresh process (its imports included) and
writes the class page and N feedback pages. Printed: the command's wall time, the class page's size and the
pages' total, against the issue's goals (under 10 s, under 5 MB). --quick: 60 submissions.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))

GOAL_S, GOAL_MB = 10.0, 5.0
MESSAGES = ["62 of 128 verification cases differ from the Python reference. First: case v{i:03d}, draft [2, 1, 1]:\n"
            "  next_u32: expected 3062001088, got {i}",
            "prompt_lookup(ctx=[4, 0, 2, 2, {i}], k=8, max_ngram=5, min_ngram=2) with a deadline of 5 s: no answer",
            "smallest input where yours differs: rollback(keep={i}): expected 3 released, got 2"]


def ledger(results: Path, n: int) -> None:
    from harness.kernel import report as rp
    from harness.grading.ledger import Ledger
    from harness.kernel.outcomes import Outcome
    from harness.registry import load_chapter

    ch = load_chapter("L10.8")
    names = [f"student-{i:04d}" for i in range(n)]
    book = Ledger(ch, names, results.parent / "grades.csv", results, 1, True, {"digest": "bench"}, "bwrap")
    book.write = lambda: None  # the CSV once at the end: this bench times the report, not the ledger
    pitfalls = [m for m in ch.mutants]
    for i, name in enumerate(names):
        tests = []
        for j, t in enumerate(ch.tests):
            bad = (i * 7 + j * 3) % 13 == 0
            outcome = (Outcome.TIMEOUT if (i + j) % 5 == 0 else Outcome.FAIL) if bad else Outcome.PASS
            tests.append(rp.TestResult(t.name, t.kind, outcome, 0.2, MESSAGES[(i + j) % 3].format(i=i) if bad else "",
                                       0.0 if bad else t.points, t.points))
        m = pitfalls[i % len(pitfalls)]
        hints = [{"id": m.id, "pitfall": m.pitfall, "matched": 9, "shows": 10}] if i % 3 == 0 else []
        book.record(rp.Report("L10.8", name, True, tests, 3.0, pitfall_matches=hints, sandbox="bwrap",
                              language="rust" if i % 4 == 0 else "python"), 2 + (i * 37 % 380) / 10, f"d{i}", "local")
    Ledger.write(book)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common(ap, "report_build", "60 submissions")
    ap.add_argument("--submissions", type=int, default=None, help="submissions in the class (default 600)")
    a = ap.parse_args()
    n = a.submissions or (60 if a.quick else 600)
    with tempfile.TemporaryDirectory(prefix="ol-report-bench-") as tmp:
        results = Path(tmp) / "grades-results"
        results.mkdir()
        ledger(results, n)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "harness.cli", "report", "L10.8", str(results)], check=True, cwd=REPO,
                       capture_output=True)
        wall = time.perf_counter() - start
        page = (Path(tmp) / "grades.html").stat().st_size / 1024**2
        pages = sum(p.stat().st_size for p in results.glob("*.html")) / 1024**2
    figures = {"submissions": n, "ol_report_s": round(wall, 2), "class_page_mb": round(page, 3), "feedback_pages_mb": round(pages, 3),
               "goal_s": GOAL_S, "goal_mb": GOAL_MB}
    print(f"ol report on {n} submissions: {wall:.2f} s (goal under {GOAL_S:g} s, {wall / GOAL_S:.2f}x of it); "
          f"class page {page:.2f} MB (goal under {GOAL_MB:g} MB, {page / GOAL_MB:.2f}x); {n} feedback pages {pages:.2f} MB")
    write_figures(out_path(a, "report_build"), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
