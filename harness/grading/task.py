"""One submission's grading as a task: everything it needs travels with it, and its report comes back as data.

`ol grade` makes one Task per submission (harness.grading.grade) and runs `run(task)` in a thread of its own
process (the local default) or on a Dask worker (harness.grading.cluster), perhaps on a machine with no shared
filesystem. The task carries the submission's bytes (harness.grading.parcel), the chapter, the seed, whether an
unconfined worker is acceptable, and the client's harness version (harness.subjects.version). Where it runs:

1. a harness version other than the client's (files, interpreter, a numeric library) refuses the task
   (WorkerRefused, naming what differs): no mixed-version grades;
2. the sandbox is chosen as for `ol check`; a machine that cannot confine refuses, unless --no-sandbox;
3. the parcel is unpacked and laid out by the one layout function (harness.subjects.layout) under a deadline
   (harness.subjects.upload.deadline): an entry it refuses is a rejected report (0 points, its reason, as the
   Gradescope bundle rejects it); else the judge grades it (harness.grading.judge) on fresh cases from the seed;
4. the report comes back as a dict, the worker's folder replaced by the client's path in its text.

A submission's own failure is a report, rejected or ungraded: data, never an exception, so nothing retries it and
no entry stops its class. Only the harness or the machine raises (WorkerRefused).

The fresh cases, a compiled language's reference build (bwrap), the judges' zygote and the uid-mode slots are made
once per process and (chapter, seed, harness version) (`_Run`), and removed by `close_idle` (at the end of a local
run; a Dask worker keeps the last one) or at the process's exit.

Threads: `run` is called by several threads at once (`--jobs N`, `dask worker --nthreads N`). What they share is
guarded where it lives: the runs (`_runs_lock`; each _Run's parts made once under their own locks), the parsed
test files (harness.registry.PARSE_LOCK), the reference (harness.subjects.reference), the version's digest, a
language's machine template. Nothing here changes the process's folder, environment, signals or umask.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..check.golden import fresh_golden
from ..kernel.errors import OlError
from ..kernel.paths import own_import_path
from .. import languages
from ..registry import Chapter, load_chapter
from ..kernel.report import Report
from ..sandbox.bwrap import reachable_by_other
from ..sandbox.confine import Mode, choose, grading_refusal
from ..sandbox.uids import UidPool
from ..subjects import upload
from . import judge
from .parcel import Parcel, unpack
from .zygote import Zygote
from ..subjects.version import differences, version_of

KEEP_IDLE = 1  # runs a long-lived process (a Dask worker) keeps once no task uses them: the last one


class WorkerRefused(OlError):
    """This machine will not grade: its harness differs from the client's, or it cannot confine (exit 3)."""


@dataclass(frozen=True)
class Task:
    chapter: str
    parcel: Parcel
    shown: str  # the submission's path as the client names it: its report's messages say this
    seed: int | None  # fresh cases from this seed; None: the shipped golden cases
    ref_deps: bool
    unconfined_ok: bool  # --no-sandbox: grade even where the worker cannot be confined
    version: dict  # the client's harness version (harness.subjects.version.version_of)


@dataclass
class _Run:
    """What the tasks of one (chapter, seed, harness version) share in this process, whichever thread runs them: the
    chapter, the sandbox mode, the scratch, the worker uids (harness.sandbox.uids.UidPool), and three things made
    once by the first task that needs them, each under its own lock: the fresh cases, a language's run_env, the
    zygote. `users` and `last_used` change under _runs_lock; a run is closed once no task uses it (close_idle)."""
    chapter: Chapter
    seed: int | None
    mode: Mode
    scratch: Path
    uids: UidPool | None  # mode uid only
    golden: Path | None = None
    language_env: dict[str, dict[str, str]] = field(default_factory=dict)  # by language: Language.run_env's, made once
    zygote: Zygote | None = None  # this run's judges are its forks
    users: int = 0
    last_used: float = 0.0
    golden_lock: threading.Lock = field(default_factory=threading.Lock)
    language_lock: threading.Lock = field(default_factory=threading.Lock)
    zygote_lock: threading.Lock = field(default_factory=threading.Lock)

    def fresh_golden(self) -> Path:
        with self.golden_lock:
            if self.golden is None:
                self.golden = fresh_golden(self.chapter, self.seed, self.scratch) if self.seed is not None else self.chapter.golden
            return self.golden

    def forks(self):
        """The run's zygote (harness.grading.zygote), started with the first judge: each judge a fork of it."""
        with self.zygote_lock:
            if self.zygote is None:
                self.zygote = judge.start_zygote(self.chapter.chapter, self.mode.name, self.scratch / "zygote",
                                                 warm=(self.fresh_golden(), self.seed))
            return self.zygote

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
        if self.uids is not None:
            self.uids.close()  # its uids' leases: free for another run on this machine
        shutil.rmtree(self.scratch, ignore_errors=True)

    def env_for(self, name: str) -> dict[str, str]:
        """What this run made for the judges of a submission in language `name` (Language.run_env), made once."""
        with self.language_lock:
            if name not in self.language_env:
                hook = languages.language(name).run_env
                self.language_env[name] = hook(self.chapter, self.mode, version_of(self.chapter)["digest"]) if hook else {}
            return self.language_env[name]


_runs: dict[tuple, _Run] = {}  # this process's runs, by (chapter, seed, version digest): read and changed under _runs_lock
_runs_lock = threading.Lock()


def _open(task: Task, slots: int, scratch_root: str | None) -> _Run:
    key = (task.chapter, task.seed, task.version["digest"])
    with _runs_lock:
        run = _runs.get(key)
        if run is None:
            chapter = load_chapter(task.chapter)
            mode = choose()
            if refusal := grading_refusal(chapter, mode, task.unconfined_ok, _who()):
                raise WorkerRefused(refusal)
            uids = UidPool(slots) if mode.name == "uid" else None  # each concurrent judge's worker a uid of its own
            if scratch_root is not None and mode.name == "uid" and not reachable_by_other(scratch_root):
                scratch_root = None  # a uid-mode worker must reach its folder: the system's temporary folder, then
            scratch = Path(tempfile.mkdtemp(prefix="ol-grade-", dir=scratch_root))
            scratch.chmod(0o711)  # traversable for a uid-mode worker's folder; unlistable; the fresh cases are 0600
            run = _runs[key] = _Run(chapter, task.seed, mode, scratch, uids)
        run.users += 1
        return run


def close_idle(keep: int = 0) -> None:
    """Remove the scratch of the runs no task uses, all but the `keep` most recently used."""
    with _runs_lock:
        idle = sorted((r.last_used, k) for k, r in _runs.items() if r.users == 0)
        gone = [_runs.pop(k) for _, k in idle[: max(0, len(idle) - keep)]]
    for run in gone:
        run.close()


atexit.register(close_idle)


def _where() -> str:
    """The Dask worker's address when this runs on one, else "local"."""
    if "distributed" not in sys.modules:  # the local default never imports Dask (a second of imports)
        return "local"
    from distributed import get_worker

    try:
        return f"Dask worker {get_worker().address}"
    except ValueError:  # no worker: this thread is the local default's
        return "local"


def _who() -> str:
    where = _where()
    return "this machine" if where == "local" else where


def check_version_here(chapter: str, version: dict) -> str:
    """Refuse (WorkerRefused) when this machine's harness version is not `version`, the client's (a task's; the
    client's preflight runs it as a small task pinned to each Dask worker); else return the digest."""
    mine = version_of(load_chapter(chapter))
    if mine["digest"] != version["digest"]:
        diffs = differences(mine, version) or ["their version digests differ"]
        if _where() == "local":  # the same machine: its files were edited while it graded
            raise WorkerRefused(f"the harness changed while this run graded ({'; '.join(diffs)}): ol grade stops rather than "
                                "grade one class with two versions; the ledger keeps what was graded, and a rerun grades "
                                "every submission with the new version")
        raise WorkerRefused(f"{_who()} refuses to grade: its harness version is not the client's ({'; '.join(diffs)}). "
                            "Every worker must run the client's ol checkout (same commit, same environment): "
                            "see docs/grading.md")
    return version["digest"]


def run(task: Task, slots: int = 1, started=None, scratch_root: str | None = None) -> dict:
    """Grade one submission here: {"report": report JSON, "wall_s", "where"}. `slots`: the tasks this process runs at
    once (uid mode: that many uids); `started(name)`: called as grading begins; `scratch_root`: where the scratch
    goes (a Dask worker's own folder; default: the system's temporary folder)."""
    check_version_here(task.chapter, task.version)
    run_ = _open(task, slots, scratch_root)
    try:
        if started is not None:
            started(task.parcel.name)
        with tempfile.TemporaryDirectory(prefix="sub-", dir=run_.scratch, ignore_cleanup_errors=True) as made:
            box = Path(made)
            box.chmod(0o711)

            def verdict(report) -> dict:
                report = report.but(sandbox=run_.mode.name)
                return {"report": _shown_as(report.to_json(), str(sub), task.shown), "wall_s": 0.0, "where": _where()}

            sub = box / "in" / task.parcel.name
            with upload.deadline(task.parcel.name, "unpacking") as prep:  # the work before the judge: PREP_S at most
                try:
                    (box / "in").mkdir(mode=0o700)  # the judge's alone before a byte lands: its path is on the judge's command line
                    sub = unpack(task.parcel, box / "in")
                    prep.step = "laying out"
                    language, rejection = judge.layout_of(run_.chapter, sub)
                except upload.TooSlow as e:  # too big to unpack in time (rejected), or a slow machine (ungraded)
                    return verdict(judge.too_slow(run_.chapter, task.parcel.name, task.ref_deps, e))
                except Exception as e:  # noqa: BLE001 -- a corrupt parcel, the layout check's own failure: its own row
                    doing = "its files could not be unpacked" if prep.step == "unpacking" else "the layout check failed on it"
                    return verdict(Report.for_ungraded(run_.chapter, task.parcel.name, task.ref_deps, f"{doing} ({type(e).__name__}: {e})"))
            if rejection is not None or language is None:  # no submission: a verdict (0), the same as the Gradescope bundle's
                return verdict(Report.for_rejected(run_.chapter, task.parcel.name, task.ref_deps, rejection or "no language fits it"))
            try:
                options = judge.JudgeOptions(run_.chapter, run_.fresh_golden(), task.ref_deps, run_.mode.name, run_.forks(),
                                             run_.uids, run_.env_for(language))
                report, wall = judge.judge(sub, box, task.shown, options)
            except Exception as e:  # noqa: BLE001 -- the grader's or this machine's fault on this entry: its own row
                why = (f"the grader failed on {_who()}, not the submission "
                       f"({type(e).__name__}: {' '.join(str(e).split())[:300]})")
                return verdict(Report.for_ungraded(run_.chapter, task.parcel.name, task.ref_deps, why))
            data = _shown_as(report.to_json(), str(sub), task.shown)
            return {"report": data, "wall_s": wall, "where": _where()}
    finally:
        with _runs_lock:
            run_.users -= 1
            run_.last_used = time.monotonic()
        close_idle(KEEP_IDLE)


def _shown_as(data: dict, here: str, shown: str) -> dict:
    """The report with this machine's copy of the submission named as the client names it (JSON-escaped both)."""
    if here == shown:
        return data
    text = json.dumps(data).replace(json.dumps(here)[1:-1], json.dumps(shown)[1:-1])
    return json.loads(text)


def run_on_dask_worker(task: Task) -> dict:
    """`run` as a Dask task: it tells the client when it starts (the topic "ol-grade-started")."""
    from distributed import get_worker  # here: Dask's imports, which the local default never needs

    own_import_path()  # a worker started in a class folder (`python -m distributed...`, PYTHONPATH=.): not on its path
    worker = get_worker()
    key = worker.get_current_task()

    def started(_name: str) -> None:  # by the task's key: a name not UTF-8 would break msgpack'd events
        worker.log_event("ol-grade-started", {"key": key, "worker": worker.address, "pid": os.getpid()})

    return run(task, slots=worker.state.nthreads, started=started, scratch_root=worker.local_directory)
