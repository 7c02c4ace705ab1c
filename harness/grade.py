"""`ol grade`: a class of submissions, each judged in a process of its own, in parallel.

Each submission is graded by a separate `ol check` process (its own judge) that talks to the
submission's worker; a submission that kills its judge, hangs past the whole-check limit or
crashes loses only its own grade. Results are kept in memory and written once every process has
ended, so no submission can write or overwrite a results file. Grading uses fresh cases from a
recorded seed: the same seed regrades identically.
"""

from concurrent.futures import ThreadPoolExecutor
import csv
import json
import os
import shutil
from pathlib import Path
import subprocess
import sys
import tempfile
import time

from .errors import BadSubmission
from .fixtures import fresh_golden
from .paths import REPO
from .registry import Chapter

WHOLE_CHECK_S = 900  # one submission's whole check; the per-test budgets already bound a normal run


def _judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path) -> dict:
    out = scratch / f"{sub.name}.json"
    cmd = [sys.executable, "-m", "harness.cli", "check", chapter.chapter, "--submission", str(sub), "--golden", str(golden), "--json", str(out)]
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
    if problem is None:
        try:
            report = json.loads(out.read_text())
        except ValueError:
            problem = "the judge's report was unreadable"
    if problem is not None:
        report = {"chapter": chapter.chapter, "submission": str(sub), "ref_deps": ref_deps,
                  "tests": [{"name": t.name, "kind": t.kind, "outcome": "error", "duration_s": 0.0, "message": problem,
                             "points": 0.0, "max_points": t.points, "pitfalls": []} for t in chapter.tests],
                  "summary": {"passed": 0, "failed": len(chapter.tests), "total": len(chapter.tests), "score": 0.0,
                              "max_score": chapter.max_points}}
    report["submission"] = sub.name
    report["summary"]["wall_s"] = round(elapsed, 2)
    return report


def grade(chapter: Chapter, submissions_dir: Path, jobs: int, seed: int | None, ref_deps: bool, on_done=None) -> dict:
    if not submissions_dir.is_dir():
        raise BadSubmission(f"{submissions_dir} is not a folder of submissions (one subfolder each)")
    subs = sorted(p for p in submissions_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise BadSubmission(f"{submissions_dir} holds no submission folders")
    scratch = Path(tempfile.mkdtemp(prefix="ol-grade-"))
    golden = fresh_golden(chapter, seed, scratch) if seed is not None else chapter.golden
    reports: list[dict] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for report in pool.map(lambda s: _judge(chapter, s, golden, ref_deps, scratch), subs):
                reports.append(report)
                if on_done:
                    on_done(report)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the reports are in memory; the fresh cases go too
    return {"chapter": chapter.chapter, "seed": seed, "fresh": seed is not None, "ref_deps": ref_deps,
            "tests": [t.name for t in chapter.tests], "reports": reports, "summary": summarize(chapter, reports)}


def summarize(chapter: Chapter, reports: list[dict]) -> dict:
    passed_by_test = {t.name: 0 for t in chapter.tests}
    pitfalls: dict[str, int] = {}
    for r in reports:
        for t in r["tests"]:
            passed_by_test[t["name"]] += t["outcome"] == "pass"
        for m in r.get("pitfall_matches", [])[:1]:
            pitfalls[f"{m['id']}: {m['pitfall']}"] = pitfalls.get(f"{m['id']}: {m['pitfall']}", 0) + 1
    return {"submissions": len(reports), "all_passed": sum(r["summary"]["passed"] == r["summary"]["total"] for r in reports),
            "passed_by_test": passed_by_test, "pitfalls_most_matched": dict(sorted(pitfalls.items(), key=lambda kv: -kv[1]))}


CSV_FIXED = ["submission", "passed", "failed", "score", "max_score", "wall_s"]


def write_outputs(result: dict, out_csv: Path, results_dir: Path | None) -> None:
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIXED + result["tests"])
        for r in result["reports"]:
            s = r["summary"]
            outcomes = {t["name"]: t["outcome"] for t in r["tests"]}
            w.writerow([r["submission"], s["passed"], s["failed"], s["score"], s["max_score"], s["wall_s"]] +
                       [outcomes.get(n, "missing") for n in result["tests"]])
    if results_dir is not None:
        results_dir.mkdir(parents=True, exist_ok=True)
        for r in result["reports"]:
            (results_dir / f"{r['submission']}.json").write_text(json.dumps({**r, "seed": result["seed"]}, indent=2) + "\n")
        summary = {k: result[k] for k in ("chapter", "seed", "fresh", "ref_deps")} | {"summary": result["summary"]}
        (results_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
