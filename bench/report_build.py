"""The class report of a synthetic class: how long `ol report` takes and how big its page is, beside the goals.

    python bench/report_build.py [--submissions N] [--out F.json] [--quick]

A ledger of N submissions (default 600) is written by harness.grading.ledger itself, each a report of the chapter's
16 tests with failures, messages (a differing case, a timeout's call) and pitfall hints spread over the class,
and wall times from 2 to 40 s; then `ol report L10.8 DIR` runs as a fresh process (its imports included) and
writes the class page and N feedback pages. Printed: the command's wall time, the class page's size and the
pages' total, against the issue's goals (under 10 s, under 5 MB). --quick: 60 submissions.
--records: then what each record the results directory keeps saves a later `ol report` (issue 40: a record stays
only with a saving of a second or more, written in its module's docstring): the same command run again with both
records (`.validated.json`, harness.grading.ledger; `.pages.json`, harness.grading.class_report), without the one,
without the other, and without both (each removed before its run), --repeat times (default 3), interleaved; the
fastest of each is printed, and each record's saving beside it.
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


VALIDATED, PAGES = ".validated.json", ".pages.json"


def report(results: Path) -> float:
    """`ol report L10.8 RESULTS` as a fresh process: its wall time."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", "report", "L10.8", str(results)], check=True, cwd=REPO,
                   capture_output=True)
    return time.perf_counter() - start


def records(results: Path, repeat: int) -> dict:
    """The fastest `ol report` of `repeat` with both records, without each, without either (the records written
    again by an untimed run before the next)."""
    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, dropped in (("both", ()), (VALIDATED, (VALIDATED,)), (PAGES, (PAGES,)), ("neither", (VALIDATED, PAGES))):
            for f in dropped:
                (results / f).unlink(missing_ok=True)
            runs.setdefault(name, []).append(report(results))
            if dropped:
                report(results)
    return {name: round(min(times), 2) for name, times in runs.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common(ap, "report_build", "60 submissions")
    ap.add_argument("--submissions", type=int, default=None, help="submissions in the class (default 600)")
    ap.add_argument("--records", action="store_true", help="then what each kept record saves a later `ol report`")
    ap.add_argument("--repeat", type=int, default=3, help="with --records: runs of each (the fastest counts)")
    a = ap.parse_args()
    n = a.submissions or (60 if a.quick else 600)
    with tempfile.TemporaryDirectory(prefix="ol-report-bench-") as tmp:
        results = Path(tmp) / "grades-results"
        results.mkdir()
        ledger(results, n)
        wall = report(results)
        page = (Path(tmp) / "grades.html").stat().st_size / 1024**2
        pages = sum(p.stat().st_size for p in results.glob("*.html")) / 1024**2
        kept = records(results, a.repeat) if a.records else None
    figures = {"submissions": n, "ol_report_s": round(wall, 2), "class_page_mb": round(page, 3), "feedback_pages_mb": round(pages, 3),
               "goal_s": GOAL_S, "goal_mb": GOAL_MB, **({"records_s": kept} if kept else {})}
    print(f"ol report on {n} submissions: {wall:.2f} s (goal under {GOAL_S:g} s, {wall / GOAL_S:.2f}x of it); "
          f"class page {page:.2f} MB (goal under {GOAL_MB:g} MB, {page / GOAL_MB:.2f}x); {n} feedback pages {pages:.2f} MB")
    if kept:
        print(f"ol report again, fastest of {a.repeat}: both records kept {kept['both']:.2f} s; without {VALIDATED} "
              f"{kept[VALIDATED]:.2f} s (it saves {kept[VALIDATED] - kept['both']:.2f} s); without {PAGES} {kept[PAGES]:.2f} s "
              f"(it saves {kept[PAGES] - kept['both']:.2f} s); without either {kept['neither']:.2f} s")
    write_figures(out_path(a, "report_build"), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
