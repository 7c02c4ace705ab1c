"""`ol grade`: a class of submissions, each judged in a process of its own, here or on a Dask cluster.

Each entry of the submissions folder (harness.subjects.layout) is graded by a separate `ol check` process (forked
from the run's zygote: harness.grading.zygote): one that kills its judge, hangs or crashes loses only its own
grade. Fresh cases come from a recorded seed: the same seed regrades identically. Each submission travels as a
parcel of its bytes (harness.grading.parcel) in a Task (harness.grading.task), run by this process's threads
(`--jobs`) or a Dask scheduler's workers (harness.grading.cluster): the same judge on the same bytes. The results
directory is the ledger (harness.grading.ledger): a rerun skips what it holds graded with the run's key.

Nothing fails quietly. Every output path is checked before anyone is graded. An entry the layout function refuses,
or its judge refuses as malformed (exit 2 with the refusal's JSON line on stdout), is *rejected*: a score of 0 and
the reason, as the Gradescope bundle gives it. One whose judge gave no trustworthy report (a usage or harness error,
killed, out of time, an unreadable report) is *ungraded*, with the reason: never a 0; `ol grade` exits 3. Each
report is written atomically as it finishes, and the CSV after it: an interrupted run loses nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
import os
from pathlib import Path
import tempfile
import time
from typing import TYPE_CHECKING

from ..kernel.errors import UsageError, raise_if_interrupted
from ..registry import Chapter
from ..kernel.report import Report
from ..sandbox.confine import descendants, kill_all
from ..subjects import upload
from . import task as task_mod
from .judge import language_of, too_slow
from .ledger import Ledger
from .parcel import ParcelError, digest, pack
from .task import Task
from ..subjects.version import version_of

if TYPE_CHECKING:  # Dask is imported by --scheduler alone (harness.cli.grade)
    from .cluster import Cluster

STOP_S = 30  # a stopped run waits this long at most for its running judges to be killed


class Events:
    """What a grading run tells as it goes (the CLI's live progress, harness.cli.progress, overrides these); nothing
    here prints. `started` may be called from another thread; `begin` and `finished` from the caller's."""

    def begin(self, total: int, skipped: list[str], todo: int) -> None: ...

    def started(self, name: str, where: str) -> None: ...

    def finished(self, report: Report, wall: float, where: str) -> None: ...


@dataclass(frozen=True)
class GradeOptions:
    """How a class is graded: `ol grade`'s options as data."""

    out_csv: Path  # the grades CSV
    results_dir: Path  # the ledger (harness.grading.ledger): a rerun skips what it holds graded with the run's key
    seed: int | None = None  # fresh cases from this seed; None: the shipped cases
    ref_deps: bool = False
    jobs: int = 1  # threads grading here (without `cluster`)
    cluster: Cluster | None = None  # Dask workers grade instead (harness.grading.cluster)
    unconfined_ok: bool = False  # --no-sandbox: a machine that cannot confine grades anyway
    regrade: bool = False  # every submission again, whatever the ledger holds
    sandbox: str | None = None  # the mode the outputs record until a report says (this machine's, for the local default)
    roster: dict | None = None  # the class's roster matched to its entries (harness.grading.roster.match)


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
            tempfile.TemporaryFile(dir=folder, prefix=".ol-probe-").close()
        except OSError as e:
            raise UsageError(f"{what}: cannot write in {folder} ({e.strerror or e}); pick a writable place") from None


def grade(chapter: Chapter, submissions_dir: Path, options: GradeOptions, events: Events | None = None) -> dict:
    """Grade every submission of the folder the ledger does not hold graded with this run's key (`regrade`: every
    one), each a Task run by `jobs` threads here or the `cluster`'s Dask workers; `events` hears the progress.
    Returns the ledger's result."""
    events = events or Events()
    seed, ref_deps, unconfined_ok = options.seed, options.ref_deps, options.unconfined_ok
    subs = upload.submissions_in(chapter, submissions_dir)
    check_outputs(options.out_csv, options.results_dir)
    version = version_of(chapter)
    ledger = Ledger(chapter, [s.name for s in subs], options.out_csv, options.results_dir, seed, ref_deps, version,
                    options.sandbox, options.roster)
    todo, by_name = [], {s.name: s for s in subs}
    for sub in subs:
        try:
            with upload.deadline(sub.name, "reading and packing"):  # a slow entry is its own row, not the class's stop
                if not options.regrade and ledger.graded(sub.name, digest(sub), unconfined_ok):
                    continue
                parcel = pack(sub)
        except ParcelError as e:  # a link, a cap passed, an unreadable file: no submission, on every engine
            report = Report.for_rejected(chapter, sub.name, ref_deps, str(e))
        except upload.TooSlow as e:  # past the deadline: the upload's fault (too big) or the machine's
            report = too_slow(chapter, sub.name, ref_deps, e)
        except Exception as e:  # noqa: BLE001 -- ol's own failure on this one entry: its row says so, the class goes on
            report = Report.for_ungraded(chapter, sub.name, ref_deps, f"ol could not pack its files ({type(e).__name__}: {e})")
        else:
            todo.append(Task(chapter.chapter, parcel, str(sub), seed, ref_deps, unconfined_ok, version))
            continue
        ledger.record(report, 0.0, "", "client")  # its row, made here: no submission to ship
    events.begin(len(subs), list(ledger.skipped), len(todo))

    def done(task, result: dict) -> None:
        report = Report.from_json(result["report"])
        if report.language is None and report.rejected is None:  # a rejected entry has none
            report = report.but(language=language_of(chapter, by_name[task.parcel.name]))
        ledger.record(report, result["wall_s"], task.parcel.digest, result["where"])
        events.finished(report, result["wall_s"], result["where"])
        raise_if_interrupted()  # a Ctrl-C that something swallowed (kernel.errors) stops the class here, this grade kept

    def lost(task, reason: str) -> None:  # the cluster could not finish it (its workers kept dying): ungraded
        report = Report.for_ungraded(chapter, task.parcel.name, ref_deps, reason)
        done(task, {"report": report.to_json(), "wall_s": 0.0, "where": "cluster"})

    unfinished = "no verdict came back for it (a harness bug): grade it again"
    try:
        if todo and options.cluster is not None:
            options.cluster.run(todo, events.started, done, lost)
        elif todo:
            _run_here(todo, max(1, options.jobs), events.started, done)
    except KeyboardInterrupt:
        unfinished = "the run was interrupted before it was graded: rerun the same command to grade it"
        raise
    except BaseException as e:
        unfinished = f"the run stopped before it was graded ({type(e).__name__}: {' '.join(str(e).split())[:300]}): rerun to grade it"
        raise
    finally:
        ledger.fill(unfinished)  # every entry a row, whatever stopped the run; grades.csv and summary.json with them
    return ledger.result


def _run_here(tasks: list, jobs: int, started, done) -> None:
    """The local default: `jobs` threads running harness.grading.task.run side by side; done() (and so the ledger) in
    this thread, in finishing order; started() from the pool's. Stopped, it drops the queue and kills the judges."""
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
