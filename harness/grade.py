"""`ol grade`: a class of submissions, each judged in a process of its own, in parallel.

Each entry of the submissions folder (a folder, a bare chapter file, or a zip: harness.layout) is
graded by a separate `ol check` process (its own judge) that talks to the submission's worker; a
submission that kills its judge, hangs past the whole-check limit or crashes loses only its own
grade. Grading uses fresh cases from a recorded seed: the same seed regrades identically.

Nothing fails quietly. Every output path is checked before anyone is graded. A submission whose
judge gave no trustworthy report (it exited with a usage or harness error, was killed, ran out of
time, or wrote an unreadable report) is *ungraded*, with the reason: never a 0. The CSV and each
report are rewritten atomically as every submission finishes, so an interrupted run loses nothing.
"""

from concurrent.futures import ThreadPoolExecutor, as_completed
import json
import os
import queue
import shutil
from pathlib import Path
import subprocess
import sys
import tempfile
import time

from .confine import slot_uids
from .errors import BadSubmission, OlError, UsageError
from .golden import fresh_golden
from .outcomes import Outcome
from .paths import REPO
from .registry import Chapter
from .report import Report, TestResult

WHOLE_CHECK_S = 900  # one submission's whole check; the per-test budgets already bound a normal run


def _ungraded(chapter: Chapter, name: str, ref_deps: bool, reason: str) -> Report:
    """The report of a submission its judge could not grade: every test an error, the reason in each."""
    tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, reason, 0.0, t.points) for t in chapter.tests]
    return Report(chapter.chapter, name, ref_deps, tests, ungraded=reason)


def _language_of(chapter: Chapter, sub: Path) -> str | None:
    """The language of a submission its judge could not grade, from the one layout function; None if none fits."""
    from .layout import detect

    try:
        found = detect(chapter, sub)
    except (OlError, OSError):
        return None
    found.close()
    return found.language


def _judge_failure(code: int, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
    if code < 0:
        return f"its judge was killed by signal {-code} before it reported (the submission may have killed it)"
    if code == 2:
        return f"the judge refused it as input: {last}"
    return f"the judge failed (exit {code}) without a report{': ' + last if last else ''}"


def _judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path, sandbox: str,
           uids: "queue.Queue | None" = None, template: Path | None = None) -> tuple[Report, float]:
    """One submission's judge: `ol check --json -` in a session of its own; its report comes back over the
    judge's stdout pipe (no file a submission could reach), trusted only from a judge that exited 0 or 1.
    `uids`: mode uid, the free worker uids (harness.confine.slot_uids): this judge's worker takes one."""
    uid = uids.get() if uids is not None else None
    try:
        return _run_judge(chapter, sub, golden, ref_deps, scratch, sandbox, uid, template)
    finally:
        if uid is not None:
            uids.put(uid)


def _run_judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path, sandbox: str,
               uid: int | None, template: Path | None = None) -> tuple[Report, float]:
    cmd = [sys.executable, "-m", "harness.cli", "check", chapter.chapter, "--submission", str(sub), "--golden", str(golden),
           "--json", "-"]
    if ref_deps:
        cmd.append("--ref-deps")
    tmp = scratch / f"{sub.name}.tmp"  # the judge's temporary files: removed with the scratch, even if it is killed
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o711)  # mode uid: the worker's own folder in it is reached by name; nothing in it can be listed
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp), "OL_SANDBOX": sandbox,
           "OL_RUST_CACHE": "0"}  # every Rust submission builds clean: no build output shared between students
    if uid is not None:
        env["OL_SANDBOX_UID"] = str(uid)
    if template is not None:  # a Rust submission's build starts from the run's build of the given crates
        env["OL_RUST_TEMPLATE"] = str(template)
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=WHOLE_CHECK_S, env=env, cwd=tmp,
                           stdin=subprocess.DEVNULL, start_new_session=True)
        problem = None if r.returncode in (0, 1) else _judge_failure(r.returncode, r.stderr)
    except subprocess.TimeoutExpired:
        problem = f"the whole check took longer than {WHOLE_CHECK_S} s and was stopped"
    elapsed = time.perf_counter() - start
    report = None
    if problem is None:
        try:
            report = Report.from_json(json.loads(r.stdout))
        except (ValueError, OlError) as e:
            problem = f"the judge's report was unreadable ({e})"
    if report is None:
        report = _ungraded(chapter, sub.name, ref_deps, problem)
        report.sandbox, report.language = sandbox, _language_of(chapter, sub)
    report.submission = sub.name
    return report, elapsed


def submissions_in(chapter: Chapter, submissions_dir: Path) -> list[Path]:
    """The folder's submissions: every subfolder and zip (each judge finds its layout with the one layout
    function, harness.layout, and a malformed one is ungraded with the reason), and every bare chapter
    file; other loose files (a README, a roster) are not submissions."""
    if not submissions_dir.is_dir():
        raise BadSubmission(f"{submissions_dir} is not a folder of submissions (one entry each: a folder, a file or a zip)")
    uploads = {name for lang in chapter.languages.values() for name in lang.uploads}
    subs = [p.resolve() for p in sorted(submissions_dir.iterdir()) if not p.name.startswith(".")
            and (p.is_dir() or p.suffix == ".zip" or p.name in uploads)]
    if not subs:
        raise BadSubmission(f"{submissions_dir} holds no submissions")
    return subs


def check_outputs(out_csv: Path, results_dir: Path | None) -> None:
    """Refuse, before anyone is graded, an output path that cannot be written."""
    if out_csv.is_dir():
        raise UsageError(f"--out {out_csv} is a folder; name the CSV file to write, e.g. {out_csv / 'grades.csv'}")
    for folder, what in ((out_csv.resolve().parent, f"--out {out_csv}"), (results_dir, f"--results-dir {results_dir}")):
        if folder is None:
            continue
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{what}: {folder} is a file, not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = Path(tempfile.mkstemp(dir=folder, prefix=".ol-probe-")[1])
            probe.unlink()
        except OSError as e:
            raise UsageError(f"{what}: cannot write in {folder} ({e.strerror or e}); pick a writable place") from None


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class Ledger:
    """The outputs, rewritten atomically after each submission: the CSV, and each report and the summary."""

    def __init__(self, chapter: Chapter, seed: int | None, ref_deps: bool, out_csv: Path, results_dir: Path | None) -> None:
        self.chapter, self.out_csv, self.results_dir = chapter, out_csv, results_dir
        self.result = {"chapter": chapter.chapter, "seed": seed, "fresh": seed is not None, "ref_deps": ref_deps,
                       "tests": [t.name for t in chapter.tests], "reports": [], "wall_s": []}

    def add(self, report: Report, wall: float) -> None:
        self.result["reports"].append(report)
        self.result["wall_s"].append(round(wall, 2))
        order = sorted(range(len(self.result["reports"])), key=lambda i: self.result["reports"][i].submission)
        for key in ("reports", "wall_s"):
            self.result[key] = [self.result[key][i] for i in order]
        self.result["summary"] = summarize(self.chapter, self.result["reports"])
        self._write(report, wall)

    def _write(self, report: Report, wall: float) -> None:
        from .render.csv import grades_csv

        _atomic_write(self.out_csv, grades_csv(self.result))
        if self.results_dir is not None:
            data = {**report.to_json(), "seed": self.result["seed"], "wall_s": round(wall, 2)}
            _atomic_write(self.results_dir / f"{report.submission}.json", json.dumps(data, indent=2) + "\n")
            summary = {k: self.result.get(k) for k in ("chapter", "seed", "fresh", "ref_deps", "sandbox")} | {"summary": self.result["summary"]}
            _atomic_write(self.results_dir / "summary.json", json.dumps(summary, indent=2) + "\n")


def grade(chapter: Chapter, submissions_dir: Path, jobs: int, seed: int | None, ref_deps: bool, out_csv: Path,
          results_dir: Path | None = None, on_done=None, sandbox: str = "bwrap") -> dict:
    """Grade every submission of the folder; `sandbox`: the mode every judge must confine its worker in
    (harness.confine; a judge that cannot refuses, and the submission is ungraded, never unconfined)."""
    subs = submissions_in(chapter, submissions_dir)
    check_outputs(out_csv, results_dir)
    ledger = Ledger(chapter, seed, ref_deps, out_csv, results_dir)
    ledger.result["sandbox"] = sandbox
    scratch = Path(tempfile.mkdtemp(prefix="ol-grade-"))
    scratch.chmod(0o711)  # traversable for a uid-mode worker's folder; unlistable, and the fresh cases are 0600
    try:
        golden = fresh_golden(chapter, seed, scratch) if seed is not None else chapter.golden
        template = _rust_template(chapter, subs, scratch, sandbox)
        uids = None
        if sandbox == "uid":  # each concurrent judge's worker a uid of its own: a fork bomb starves only itself
            uids = queue.Queue()
            for uid in slot_uids(max(1, jobs)):
                uids.put(uid)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(_judge, chapter, s, golden, ref_deps, scratch, sandbox, uids, template) for s in subs]
            for f in as_completed(futures):  # in the order they finish: progress never waits on a slow one
                report, wall = f.result()
                ledger.add(report, wall)
                if on_done:
                    on_done(report)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the fresh cases and the judges' scratch reports go
    return ledger.result


def _rust_template(chapter: Chapter, subs: list[Path], scratch: Path, sandbox: str) -> Path | None:
    """bwrap, with a Rust submission in the class: the Rust reference built once (harness.rust.prebuild_template),
    which every Rust submission's build copies (read-only for them: each judge builds in a copy), so each
    compiles only its own crate, incrementally. None otherwise (each builds clean)."""
    if sandbox != "bwrap" or "rust" not in chapter.languages or not any(_language_of(chapter, s) == "rust" for s in subs):
        return None
    from .confine import choose
    from .rust import prebuild_template

    return prebuild_template(chapter, scratch / "rust-template", choose(sandbox))


def summarize(chapter: Chapter, reports: list[Report]) -> dict:
    graded = [r for r in reports if r.ungraded is None]
    passed_by_test = {t.name: 0 for t in chapter.tests}
    pitfalls: dict[str, int] = {}
    for r in graded:
        for t in r.tests:
            passed_by_test[t.name] += t.outcome.passed
        for m in r.pitfall_matches[:1]:
            pitfalls[f"{m['id']}: {m['pitfall']}"] = pitfalls.get(f"{m['id']}: {m['pitfall']}", 0) + 1
    return {"submissions": len(reports), "graded": len(graded), "ungraded": len(reports) - len(graded),
            "all_passed": sum(r.ok for r in graded), "passed_by_test": passed_by_test,
            "pitfalls_most_matched": dict(sorted(pitfalls.items(), key=lambda kv: -kv[1]))}
