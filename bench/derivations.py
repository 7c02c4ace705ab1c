"""How many times each fact about a submission is derived while it is checked and graded (issue 27: each once).

    python bench/derivations.py [--subs N] [--out F.json] [--quick]

Counted with cProfile (a function's call count, nothing timed), in two runs made as a user makes them:

  ol check      `ol check L10.8 --submission S --ref-deps --json -`: what a student's check does, and what
                each of `ol grade`'s judges runs (a fork of the run's zygote runs this same command)
  ol grade      `ol grade L10.8 CLASS --ref-deps --jobs 1` over N submissions: the orchestrator's own process
                (the judges are forks, counted by the row above), per submission

The facts, each a function of the engine whose calls are counted:

  chapter loaded          harness.registry.load_chapter
  layout detected         harness.subjects.layout.detect
  sandbox probed          harness.sandbox.confine.choose
  golden file checked     harness.check.golden.verify (its digest, or its schema without one)
  golden file parsed      json.loads of the golden file's bytes (harness.check.runner.run_check's one parse)
  report written as JSON  harness.kernel.report.Report.to_json (the judge's, to its stdout; the orchestrator's, to the ledger)
  report read             harness.kernel.report.Report.from_json (from the judge's stdout; the ledger's entries, read back)
  report validated        harness.kernel.report.validate: against its schema, where it crosses from a judge (the ledger's
                          entries, once ever: harness.grading.ledger's VALIDATED)

A count per submission above 1 is a fact derived again. The study (../shared/design/architecture.md) measured,
per judged submission before issue 27: the chapter loaded about 6 times, the layout 3, the sandbox probed 3,
the golden file parsed 5, the report validated 5 and round-tripped through JSON 3 times.
--quick: 2 submissions.
"""

import argparse
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])

FACTS = {  # row -> (module file under harness/, function name)
    "chapter loaded": ("registry/__init__.py", "load_chapter"),
    "layout detected": ("subjects/layout.py", "detect"),
    "sandbox probed": ("sandbox/confine.py", "choose"),
    "golden file checked": ("check/golden.py", "verify"),
    "report written as JSON": ("kernel/report.py", "to_json"),
    "report read": ("kernel/report.py", "from_json"),
    "report validated": ("kernel/report.py", "validate"),
}
SUBMISSIONS = ("correct", "s07-draws-u-resample-only-on-rejection")  # a passing one and a failing one, in turn


def profiled(argv: list[str], cwd: Path, prof: Path) -> None:
    """Run `python -m harness.cli ARGV` under cProfile, as a fresh process from `cwd`."""
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "harness.cli", *argv]
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    if r.returncode not in (0, 1):
        sys.exit(f"`ol {' '.join(argv)}` failed (exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def counts(prof: Path) -> dict[str, int]:
    stats = pstats.Stats(str(prof)).stats
    out = {}
    for row, (where, name) in FACTS.items():
        path = str(REPO / "harness" / where)
        out[row] = sum(v[1] for (f, _, fn), v in stats.items() if fn == name and f == path and
                       (name not in ("to_json", "from_json") or _is_report_level(stats, (f, _, fn))))
    out["golden file parsed"] = _golden_parses(stats)
    return out


def _is_report_level(stats, key) -> bool:
    """Report's to_json/from_json, not TestResult's (both classes live in report.py; Report comes after)."""
    return key[1] == max(line for (f, line, fn) in stats if f == key[0] and fn == key[2])


def _golden_parses(stats) -> int:
    """json.loads calls made by the functions that parse the golden document (run_check, the pytest fixture)."""
    loads = [k for k in stats if k[2] == "loads" and k[0].endswith("json/__init__.py")]
    n = 0
    for k in loads:
        for (f, _, fn), v in stats[k][4].items():  # callers
            if (f.endswith("check/runner.py") and fn == "run_check") or (f.endswith("check/pytest_plugin.py") and fn == "golden") \
                    or (f.endswith("check/golden.py") and fn == "verify") or (f.endswith("check/diff.py")):
                n += v[1]
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=4, help="submissions in the graded class (default 4)")
    add_common(ap, "derivations", "2 submissions")
    a = ap.parse_args()
    n = 2 if a.quick else max(1, a.subs)
    with tempfile.TemporaryDirectory(prefix="ol-bench-derive-") as tmp:
        t = Path(tmp)
        t.chmod(0o700)  # mode uid refuses a class folder others could read
        cls = t / "class"
        for i in range(n):
            shutil.copytree(REPO / "examples/submissions" / SUBMISSIONS[i % 2], cls / f"sub{i:02d}")
        profiled(["check", "L10.8", "--submission", str(cls / "sub00"), "--ref-deps", "--json", "-"], t, t / "check.prof")
        profiled(["grade", "L10.8", str(cls), "--ref-deps", "--jobs", "1", "--out", str(t / "g.csv")], t, t / "grade.prof")
        check = counts(t / "check.prof")
        grade = counts(t / "grade.prof")
    rows = list(FACTS) + ["golden file parsed"]
    print(f"{'fact':24s} {'ol check':>9s} {'ol grade, per submission':>26s} {'judged submission, in all':>26s}")
    figures = {}
    for row in rows:
        per_sub = grade[row] / n
        total = check[row] + per_sub  # a judged submission: its judge (an ol check) and its share of the orchestrator
        figures[row] = {"check": check[row], "grade_per_submission": per_sub, "judged_submission": total}
        print(f"{row:24s} {check[row]:9d} {per_sub:26.2f} {total:26.2f}")
    print(f"(ol grade over {n} submissions, --jobs 1; the orchestrator's once-per-run facts spread over them)")
    write_figures(out_path(a, "derivations"), {"quick": a.quick, "submissions": n, "facts": figures})


if __name__ == "__main__":
    main()
