"""`ol grade`: a class of submissions, each judged in a process of its own, here or on a Dask cluster.

Each entry of the submissions folder (a folder, a bare chapter file, or a zip: harness.layout) is
graded by a separate `ol check` process (its own judge, forked from the run's zygote: harness.zygote)
that talks to the submission's worker; a
submission that kills its judge, hangs past the whole-check limit or crashes loses only its own
grade. Grading uses fresh cases from a recorded seed: the same seed regrades identically.

Every submission travels as a parcel of its bytes (harness.parcel) in a Task (harness.task), run by
threads of this process (the local default, `--jobs`) or by the workers of a Dask scheduler
(harness.cluster, `--scheduler`): the same judge on the same bytes, so the same grades. The results
directory is the ledger (harness.ledger): a rerun skips what it holds graded with the run's key.

Nothing fails quietly. Every output path is checked before anyone is graded. An entry that is no
submission (the layout function, harness.layout, refuses it: empty, misnamed, an unreadable archive,
a link, past a cap) is *rejected*: a score of 0 and the reason, a verdict as the Gradescope bundle
gives it; so is one its judge refuses as malformed once the layout check passed (exit 2 with the
refusal's one JSON line on stdout: a crate without src/lib.rs), with the judge's one-line reason. A submission whose judge gave no trustworthy report (it exited with a usage or harness
error, was killed, ran out of time, or wrote an unreadable report) is *ungraded*, with the reason:
never a 0; that is the grader's or the machine's failure, and `ol grade` exits 3. Each report is
written atomically as it finishes, and the CSV after it, so an interrupted run loses nothing.
"""

from concurrent.futures import ThreadPoolExecutor, as_completed
import json
import os
from pathlib import Path
import subprocess
import tempfile
import time

from . import upload
from .errors import BadSubmission, OlError, UsageError
from .outcomes import Outcome
from .paths import REPO
from .registry import Chapter
from .report import Report, TestResult

STOP_S = 30  # a stopped run waits this long at most for its running judges to be killed
WHOLE_CHECK_S = 900  # one submission's whole check; the per-test budgets already bound a normal run
# Not passed on to a judge: a Dask nanny sets MALLOC_TRIM_THRESHOLD_=65536 for its worker's memory, and a
# judge under it (millions of small allocations) takes 0.5 s more CPU a check, 25 % (2.1-2.5 s -> 2.7-2.9 s)
JUDGE_ENV_DROP = ("MALLOC_TRIM_THRESHOLD_",)


def _ungraded(chapter: Chapter, name: str, ref_deps: bool, reason: str) -> Report:
    """The report of a submission its judge could not grade: every test an error, the reason in each."""
    tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, reason, 0.0, t.points) for t in chapter.tests]
    return Report(chapter.chapter, name, ref_deps, tests, ungraded=reason)


def _rejected(chapter: Chapter, name: str, ref_deps: bool, reason: str) -> Report:
    """The report of an entry that is no submission (the layout function's `reason`): every test failed, 0 points."""
    tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, f"not run: {reason}", 0.0, t.points) for t in chapter.tests]
    return Report(chapter.chapter, name, ref_deps, tests, rejected=reason)


def too_slow(chapter: Chapter, name: str, ref_deps: bool, e) -> Report:
    """The row of an entry whose work before the judge passed its deadline (harness.upload.TooSlow): rejected
    when the upload is more than source, ungraded when the machine was slow on a source-sized one."""
    return (_rejected if e.upload_fault else _ungraded)(chapter, name, ref_deps, str(e))


def layout_of(chapter: Chapter, sub: Path) -> tuple[str | None, str | None]:
    """(language, None) of a submission the one layout function accepts; (None, its reason) when it refuses it."""
    from .layout import detect

    try:
        found = detect(chapter, sub)
    except BadSubmission as e:
        return None, str(e)
    found.close()
    return found.language, None


def _language_of(chapter: Chapter, sub: Path) -> str | None:
    """The language of a submission, for its report when its judge gave none; None if none fits or the look fails."""
    try:
        return layout_of(chapter, sub)[0]
    except Exception:  # noqa: BLE001 -- only a label: the report's verdict stands without it
        return None


def _judge_failure(code: int, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
    if code < 0:
        return f"its judge was killed by signal {-code} before it reported (the submission may have killed it)"
    if code == 2:
        return f"the judge refused it as input: {last}"
    return f"the judge failed (exit {code}) without a report{': ' + last if last else ''}"


def _refusal(code: int, stdout: str) -> str | None:
    """The reason a judge that exited 2 gives for refusing its submission as malformed (the one JSON line
    harness.cli writes for `--json -` on a BadSubmission); None for any other exit, or another refusal
    (a usage error, a machine without cargo: the grader's failure, ungraded)."""
    if code != 2:
        return None
    try:
        said = json.loads(stdout)
    except ValueError:
        return None
    reason = said.get("refused") if isinstance(said, dict) else None
    return reason if isinstance(reason, str) and reason.strip() else None


def _one_line(text: str, cap: int = 300) -> str:
    """A reason as one line of at most `cap` characters (a row's reason cell)."""
    line = " ".join(text.split())
    return line if len(line) <= cap else line[:cap - 3] + "..."


def _judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path, sandbox: str,
           uids, template: Path | None, shown: str | None, forks) -> tuple[Report, float]:
    """One submission's judge: `ol check --json -`, forked in a session of its own; its report comes back over the
    judge's stdout pipe (no file a submission could reach), trusted only from a judge that exited 0 or 1.
    `uids`: mode uid, the run's harness.uids.UidPool: this judge's worker takes a uid no process owns, and every
    process of it is killed before the uid goes back (a daemon it left cannot reach the next student's worker).
    `shown`: the submission's path as the client names it, which a failed judge's reason says instead of
    `sub` (this machine's copy), before the reason is cut to length: the same reason on every machine.
    `forks`: the run's harness.zygote.Zygote, whose fork the judge is."""
    uid = uids.take() if uids is not None else None
    try:
        return _run_judge(chapter, sub, golden, ref_deps, scratch, sandbox, uid, template, shown, forks)
    finally:
        if uid is not None:
            uids.give(uid)


def judge_env(sandbox: str) -> dict:
    """The environment every judge of a grading run shares (each adds its own TMPDIR, and its uid and
    template where it has them)."""
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_ENV_DROP}
    return env | {"PYTHONPATH": str(REPO), "OL_SANDBOX": sandbox,
                  "OL_RUST_CACHE": "0",  # every Rust submission builds clean: no build output shared between students
                  "OL_SPIN_S": "0"}  # judges share the cores: none polls (harness.wire.SPIN_S)


def _run_judge(chapter: Chapter, sub: Path, golden: Path, ref_deps: bool, scratch: Path, sandbox: str,
               uid: int | None, template: Path | None, shown: str | None, forks) -> tuple[Report, float]:
    argv = ["check", chapter.chapter, "--submission", str(sub), "--golden", str(golden), "--json", "-"]
    if ref_deps:
        argv.append("--ref-deps")
    tmp = scratch / "judge.tmp"  # the judge's temporary files (a bounded name, whatever the entry's): removed with the scratch, even if it is killed
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o711)  # mode uid: the worker's own folder in it is reached by name; nothing in it can be listed
    env = judge_env(sandbox) | {"TMPDIR": str(tmp)}
    if uid is not None:
        env["OL_SANDBOX_UID"] = str(uid)
    if template is not None:  # a Rust submission's build starts from the run's build of the given crates
        env["OL_RUST_TEMPLATE"] = str(template)
    start = time.perf_counter()
    refused = None
    try:
        r = forks.run(argv, env, tmp, WHOLE_CHECK_S)  # a fork of the run's zygote, in a session of its own
        problem = None if r.returncode in (0, 1) else _judge_failure(r.returncode, r.stderr.replace(str(sub), shown or str(sub)))
        refused = _refusal(r.returncode, r.stdout)
    except subprocess.TimeoutExpired:
        problem = f"the whole check took longer than {WHOLE_CHECK_S} s and was stopped"
    elapsed = time.perf_counter() - start
    if refused is not None:  # the judge found the submission malformed (the layout check had passed): its verdict
        report = _rejected(chapter, sub.name, ref_deps, _one_line(refused.replace(str(sub), shown or str(sub))))
        report.sandbox, report.language = sandbox, _language_of(chapter, sub)
        return report, elapsed
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
    """The folder's submissions: every subfolder and zip (each is laid out by the one layout function,
    harness.layout, and a malformed one is rejected with the reason), and every bare chapter file; other
    loose files (a README, a roster) are not submissions. The folder named is resolved (the user's path);
    its entries are not: an entry that is a link is rejected when it is packed (harness.parcel)."""
    if not submissions_dir.is_dir():
        raise BadSubmission(f"{submissions_dir} is not a folder of submissions (one entry each: a folder, a file or a zip)")
    uploads = {name for lang in chapter.languages.values() for name in lang.uploads}
    base = submissions_dir.resolve()
    subs = [base / p.name for p in sorted(submissions_dir.iterdir()) if not p.name.startswith(".")
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
            if folder == results_dir:
                folder.chmod(0o700)  # the ledger is the staff's: no worker uid lists or reads it
            probe = Path(tempfile.mkstemp(dir=folder, prefix=".ol-probe-")[1])
            probe.unlink()
        except OSError as e:
            raise UsageError(f"{what}: cannot write in {folder} ({e.strerror or e}); pick a writable place") from None


class Events:
    """What a grading run tells as it goes (the CLI's live progress overrides these); nothing here prints.
    `started` may be called from another thread; `begin` and `finished` from the caller's."""

    def begin(self, total: int, skipped: list[str], todo: int) -> None: ...

    def started(self, name: str, where: str) -> None: ...

    def finished(self, report: Report, wall: float, where: str) -> None: ...


def grade(chapter: Chapter, submissions_dir: Path, seed: int | None, ref_deps: bool, out_csv: Path, results_dir: Path,
          *, jobs: int = 1, cluster=None, unconfined_ok: bool = False, regrade: bool = False, sandbox: str | None = None,
          events: Events | None = None) -> dict:
    """Grade every submission of the folder not already graded with this run's key in the ledger `results_dir`
    (harness.ledger; `regrade`: every one), each a Task (harness.task) run by `jobs` threads here or, given
    `cluster` (harness.cluster.Cluster), by its Dask workers. The sandbox is chosen where each is graded
    (harness.confine); a machine that cannot confine refuses, unless `unconfined_ok`. `sandbox`: the mode the
    outputs record until a report says (this machine's, for the local default). Returns the ledger's result."""
    from .ledger import Ledger
    from .parcel import ParcelError, digest, pack
    from .task import Task
    from .version import version_of

    events = events or Events()
    subs = submissions_in(chapter, submissions_dir)
    check_outputs(out_csv, results_dir)
    version = version_of(chapter)
    ledger = Ledger(chapter, [s.name for s in subs], out_csv, results_dir, seed, ref_deps, version, sandbox)
    todo, by_name = [], {s.name: s for s in subs}
    for sub in subs:
        try:
            with upload.deadline(sub.name, "reading and packing"):  # a slow entry is its own row, not the class's stop
                if not regrade and ledger.graded(sub.name, digest(sub), unconfined_ok):
                    continue
                parcel = pack(sub)
        except ParcelError as e:  # a link, a cap passed, an unreadable file: no submission, on every engine
            ledger.record(_rejected(chapter, sub.name, ref_deps, str(e)), 0.0, "", "client")
            continue
        except upload.TooSlow as e:  # past the deadline: the upload's fault (too big) or the machine's
            ledger.record(too_slow(chapter, sub.name, ref_deps, e), 0.0, "", "client")
            continue
        except Exception as e:  # noqa: BLE001 -- ol's own failure on this one entry: its row says so, the class goes on
            report = _ungraded(chapter, sub.name, ref_deps, f"ol could not pack its files ({type(e).__name__}: {e})")
            ledger.record(report, 0.0, "", "client")
            continue
        todo.append(Task(chapter.chapter, parcel, str(sub), seed, ref_deps, unconfined_ok, version))
    events.begin(len(subs), list(ledger.skipped), len(todo))

    def done(task, result: dict) -> None:
        report = Report.from_json(result["report"])
        if report.language is None and report.rejected is None:  # a rejected entry has none
            report.language = _language_of(chapter, by_name[task.parcel.name])
        ledger.record(report, result["wall_s"], task.parcel.digest, result["where"])
        events.finished(report, result["wall_s"], result["where"])

    def lost(task, reason: str) -> None:  # the cluster could not finish it (its workers kept dying): ungraded
        report = _ungraded(chapter, task.parcel.name, ref_deps, reason)
        done(task, {"report": report.to_json(), "wall_s": 0.0, "where": "cluster"})

    try:
        if todo and cluster is not None:
            cluster.run(todo, events.started, done, lost)
        elif todo:
            _run_here(todo, max(1, jobs), events.started, done)
    finally:
        ledger.write()  # grades.csv and summary.json from the ledger, whatever stopped the run
    return ledger.result


def _run_here(tasks: list, jobs: int, started, done) -> None:
    """The local default: `jobs` threads, each task's judge a process of its own; done() in finishing order.
    Stopped (an interrupt, a harness error), it drops the queued tasks and kills the running judges.
    The threads run harness.task.run side by side, as a Dask worker's do (what they share: harness.task);
    done() and so the ledger run in this, the caller's, thread only; started() from the pool's threads."""
    from . import task as task_mod
    from .confine import descendants, kill_all

    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = {}
    try:
        futures = {pool.submit(task_mod.run, t, jobs, lambda name: started(name, "local")): t for t in tasks}
        for f in as_completed(futures):  # in the order they finish: progress never waits on a slow one
            done(futures[f], f.result())
        pool.shutdown(wait=True)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + STOP_S
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            kill_all(descendants(os.getpid()))  # the judges (each in a session of its own) and their workers
            time.sleep(0.1)
        raise
    finally:
        task_mod.close_idle()  # this run's fresh cases, Rust build and scratch


def summarize(chapter: Chapter, reports: list[Report]) -> dict:
    """The class's counts: `graded` (a verdict on the code), `rejected` (no submission: 0), `ungraded` (no verdict)."""
    graded = [r for r in reports if r.ungraded is None and r.rejected is None]
    passed_by_test = {t.name: 0 for t in chapter.tests}
    pitfalls: dict[str, int] = {}
    for r in graded:
        for t in r.tests:
            passed_by_test[t.name] += t.outcome.passed
        for m in r.pitfall_matches[:1]:
            pitfalls[f"{m['id']}: {m['pitfall']}"] = pitfalls.get(f"{m['id']}: {m['pitfall']}", 0) + 1
    rejected = sum(r.rejected is not None and r.ungraded is None for r in reports)
    return {"submissions": len(reports), "graded": len(graded), "rejected": rejected,
            "ungraded": len(reports) - len(graded) - rejected,
            "all_passed": sum(r.ok for r in graded), "passed_by_test": passed_by_test,
            "pitfalls_most_matched": dict(sorted(pitfalls.items(), key=lambda kv: -kv[1]))}
