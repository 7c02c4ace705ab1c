"""`ol grade`: a class of submissions, each judged in a process of its own, in parallel.

Each entry of the submissions folder (a folder, a bare chapter file, or a zip: harness.layout) is
graded by a separate `ol check` process (its own judge) that talks to the submission's worker; a
submission that kills its judge, hangs past the whole-check limit or crashes loses only its own
grade. Results are kept in memory and written once every process has ended, so no submission can
write or overwrite a results file. Grading uses fresh cases from a recorded seed: the same seed
regrades identically.
"""

from concurrent.futures import ThreadPoolExecutor
import json
import os
import shutil
from pathlib import Path
import subprocess
import sys
import tempfile
import time

from .errors import BadSubmission, OlError
from .golden import fresh_golden
from .outcomes import Outcome
from .paths import REPO
from .registry import Chapter
from .report import Report, TestResult

WHOLE_CHECK_S = 900  # one submission's whole check; the per-test budgets already bound a normal run


def _unjudged(chapter: Chapter, name: str, ref_deps: bool, problem: str) -> Report:
    """The report of a submission its judge could not grade: every test an error, the reason in each."""
    tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, problem, 0.0, t.points) for t in chapter.tests]
    return Report(chapter.chapter, name, ref_deps, tests)


def _judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path) -> tuple[Report, float]:
    out = scratch / f"{sub.name}.json"
    cmd = [sys.executable, "-m", "harness.cli", "check", chapter.chapter, "--submission", str(sub), "--golden", str(golden),
           "--json", str(out)]
    if ref_deps:
        cmd.append("--ref-deps")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=WHOLE_CHECK_S, env=env, cwd=scratch,
                           stdin=subprocess.DEVNULL, start_new_session=True)
        problem = None if r.returncode in (0, 1) and out.is_file() else (
            f"the judge process for this submission ended with code {r.returncode} without a report"
            f"{' (usage error: ' + r.stderr.strip()[-300:] + ')' if r.returncode == 2 else ' (the submission may have killed it)'}")
    except subprocess.TimeoutExpired:
        problem = f"the whole check took longer than {WHOLE_CHECK_S} s and was stopped"
    elapsed = time.perf_counter() - start
    report = None
    if problem is None:
        try:
            report = Report.from_json(json.loads(out.read_text()))
        except (ValueError, OlError) as e:
            problem = f"the judge's report was unreadable ({e})"
    if report is None:
        report = _unjudged(chapter, sub.name, ref_deps, problem)
    report.submission = sub.name
    return report, elapsed


def submissions_in(chapter: Chapter, submissions_dir: Path) -> list[Path]:
    """The folder's submissions: every subfolder and zip (each judge finds its layout with the one layout
    function, harness.layout, and reports a malformed one), and every bare chapter file; other loose
    files (a README, a roster) are not submissions."""
    if not submissions_dir.is_dir():
        raise BadSubmission(f"{submissions_dir} is not a folder of submissions (one entry each: a folder, a file or a zip)")
    uploads = {name for lang in chapter.languages.values() for name in lang.uploads}
    subs = [p.resolve() for p in sorted(submissions_dir.iterdir()) if not p.name.startswith(".")
            and (p.is_dir() or p.suffix == ".zip" or p.name in uploads)]
    if not subs:
        raise BadSubmission(f"{submissions_dir} holds no submissions")
    return subs


def grade(chapter: Chapter, submissions_dir: Path, jobs: int, seed: int | None, ref_deps: bool, on_done=None) -> dict:
    subs = submissions_in(chapter, submissions_dir)
    scratch = Path(tempfile.mkdtemp(prefix="ol-grade-"))
    golden = fresh_golden(chapter, seed, scratch) if seed is not None else chapter.golden
    graded: list[tuple[Report, float]] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for item in pool.map(lambda s: _judge(chapter, s, golden, ref_deps, scratch), subs):
                graded.append(item)
                if on_done:
                    on_done(item[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the reports are in memory; the fresh cases go too
    return {"chapter": chapter.chapter, "seed": seed, "fresh": seed is not None, "ref_deps": ref_deps,
            "tests": [t.name for t in chapter.tests], "reports": [r for r, _ in graded],
            "wall_s": [round(w, 2) for _, w in graded], "summary": summarize(chapter, [r for r, _ in graded])}


def summarize(chapter: Chapter, reports: list[Report]) -> dict:
    passed_by_test = {t.name: 0 for t in chapter.tests}
    pitfalls: dict[str, int] = {}
    for r in reports:
        for t in r.tests:
            passed_by_test[t.name] += t.outcome.passed
        for m in r.pitfall_matches[:1]:
            pitfalls[f"{m['id']}: {m['pitfall']}"] = pitfalls.get(f"{m['id']}: {m['pitfall']}", 0) + 1
    return {"submissions": len(reports), "all_passed": sum(r.ok for r in reports),
            "passed_by_test": passed_by_test, "pitfalls_most_matched": dict(sorted(pitfalls.items(), key=lambda kv: -kv[1]))}


def write_outputs(result: dict, out_csv: Path, results_dir: Path | None) -> None:
    from .render.csv import grades_csv

    out_csv.parent.mkdir(parents=True, exist_ok=True)
    out_csv.write_text(grades_csv(result))
    if results_dir is not None:
        results_dir.mkdir(parents=True, exist_ok=True)
        for r, wall in zip(result["reports"], result["wall_s"]):
            data = {**r.to_json(), "seed": result["seed"], "wall_s": wall}
            (results_dir / f"{r.submission}.json").write_text(json.dumps(data, indent=2) + "\n")
        summary = {k: result[k] for k in ("chapter", "seed", "fresh", "ref_deps")} | {"summary": result["summary"]}
        (results_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
