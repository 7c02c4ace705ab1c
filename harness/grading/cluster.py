"""`ol grade --scheduler`: the class graded by the workers of an existing Dask scheduler.

The client (where the submissions and the ledger are) sends each submission as one Dask task carrying its Task
(harness.grading.task); each worker runs the sandboxed judge and returns the report as data. Nothing is shared but
the scheduler's address. Failures, and what each does:
  a worker lost mid-task: the scheduler reruns the task elsewhere (up to distributed.scheduler.allowed-failures);
    one whose workers kept dying ends KilledWorker, and that submission is ungraded, with the reason;
  a submission's own failure is a result (an ungraded report); tasks have retries=0: nothing is graded twice;
  a task raises (the grader's or the worker's fault on that entry): that submission is ungraded, with the fault;
  a worker refuses (WorkerRefused: another harness version, no sandbox) or cannot import ol: the run stops with
    the message; the ledger keeps what was graded, every other entry gets an ungraded row saying why;
  no scheduler within CONNECT_S, no worker within WORKERS_S, a worker silent to the version check for PREFLIGHT_S,
    no worker left for WORKERS_S, or no submission finishing within STALL_S: the run stops, saying which.
The client keeps AHEAD tasks in flight per worker thread (Dask places a small class's tasks unevenly when it has
them all at once): one running and one waiting on each, topped up as tasks end. Stopped or interrupted, the client
cancels what is queued; a judge already running runs to its end and its result is dropped.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path

from distributed import Client, Future, wait  # Dask at the top: only --scheduler imports this module (harness.cli.grade)
from distributed.client import FIRST_COMPLETED, FuturesCancelledError
from distributed.scheduler import KilledWorker

from ..kernel.errors import OlError, UsageError
from .task import Task, WorkerRefused, check_version_here, run_on_dask_worker

CONNECT_S = 30  # reaching the scheduler
WORKERS_S = 120  # the first worker to join; and how long the run waits once every worker is gone
POLL_S = 0.5  # how often the client looks at its futures and the workers
STALL_S = 900 + 600  # no submission finished for this long: the cluster is stuck (a judge's limit is 900 s)
PREFLIGHT_S = 60  # every worker's answer to the harness version check
AHEAD = 2  # tasks in flight per worker thread: its judge's, and the next one's, ready when that ends
TOPIC = "ol-grade-started"


class ClusterError(OlError):
    """The cluster could not grade (unreachable, no workers, a worker refused): exit 3, the ledger kept."""


class Cluster:
    """An existing Dask scheduler, by address (tcp://host:8786) or its `--scheduler-file`."""

    def __init__(self, address: str | None = None, scheduler_file: Path | None = None) -> None:
        if (address is None) == (scheduler_file is None):
            raise UsageError("name the Dask scheduler by --scheduler ADDRESS or by --scheduler-file F, not both")
        if scheduler_file is not None and not Path(scheduler_file).is_file():
            raise UsageError(f"--scheduler-file {scheduler_file}: no such file (`dask scheduler --scheduler-file F` writes it)")
        self.address, self.scheduler_file = address, scheduler_file

    @property
    def name(self) -> str:
        return self.address or f"the scheduler of {self.scheduler_file}"

    def _connect(self):
        try:
            file = None if self.scheduler_file is None else str(self.scheduler_file)
            return Client(self.address, scheduler_file=file, timeout=CONNECT_S)
        except (OSError, TimeoutError, ValueError) as e:
            raise ClusterError(f"cannot reach the Dask scheduler {self.name} within {CONNECT_S} s ({e}): is `dask scheduler` "
                               "running there, and is its port open to this machine?") from None

    def _wait_for_workers(self, client) -> None:
        try:
            client.wait_for_workers(1, timeout=WORKERS_S)
        except TimeoutError:
            raise ClusterError(f"the Dask scheduler {self.name} has no worker after {WORKERS_S} s: start some "
                               "(`dask worker ADDRESS` from the ol checkout, docs/grading.md)") from None

    def _preflight(self, client, task) -> None:
        """Every worker there now checks its harness version against the client's before any submission is sent:
        one small task pinned to each, answered within PREFLIGHT_S."""
        workers = sorted(client.nthreads())
        checks = {client.submit(check_version_here, task.chapter, task.version, key=f"ol-version-{uuid.uuid4().hex[:8]}-{i}",
                                workers=[w], allow_other_workers=False, pure=False, retries=0): w
                  for i, w in enumerate(workers)}
        try:
            wait(list(checks), timeout=PREFLIGHT_S)
        except TimeoutError:
            silent = sorted(w for f, w in checks.items() if not f.done())
            raise ClusterError(f"Dask workers {', '.join(silent)} did not answer the harness version check within "
                               f"{PREFLIGHT_S} s: are they busy with another client's work, or stuck?") from None
        finally:
            client.cancel([f for f in checks if not f.done()], force=True)
        errors = {w: f.exception() for f, w in checks.items() if f.status == "error"}
        refused = [str(e) for e in errors.values() if isinstance(e, WorkerRefused)]
        if refused:
            raise ClusterError(" | ".join(dict.fromkeys(refused)))
        if errors:
            raise ClusterError(_not_ol([f"{w}: {type(e).__name__}: {e}" for w, e in sorted(errors.items())]))

    def run(self, tasks: list, started, done, lost) -> None:
        """Grade `tasks` on the cluster: started(name, worker) as each begins (from the client's event
        loop), done(task, result) and lost(task, reason) in the order they finish (from this thread)."""
        client = self._connect()
        token = uuid.uuid4().hex[:8]
        by_key: dict[str, Task] = {}
        futures: dict = {}
        try:
            self._wait_for_workers(client)
            self._preflight(client, tasks[0])

            def on_start(event) -> None:  # from the Client's event loop thread: it only reads by_key (a dict read)
                _, msg = event
                key = msg.get("key") if isinstance(msg, dict) else None
                task = by_key.get(key) if isinstance(key, str) else None
                if task is not None:
                    started(task.parcel.name, msg.get("worker", "?"))

            client.subscribe_topic(TOPIC, on_start)
            queued = list(enumerate(tasks))
            queued.reverse()
            pending: set[Future] = set()
            last_finish, last_worker, checked = time.monotonic(), time.monotonic(), 0.0
            slots = max(1, sum(client.nthreads().values()))
            while pending or queued:
                while queued and len(pending) < AHEAD * slots:  # a task ready behind each running one
                    i, task = queued.pop()
                    key = f"ol-grade-{token}-{i:05d}"  # one run's tasks never share a key with another run's
                    by_key[key] = task
                    f = client.submit(run_on_dask_worker, task, key=key, pure=False, retries=0)
                    futures[f] = task
                    pending.add(f)
                try:
                    finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                except TimeoutError:
                    finished = set()
                except FuturesCancelledError as e:
                    raise ClusterError(f"the scheduler cancelled this run's tasks ({e}): was it restarted?") from None
                for f in finished:
                    task = futures[f]
                    if f.status == "finished":
                        done(task, f.result())
                        continue
                    exc = f.exception()
                    if isinstance(exc, KilledWorker):
                        lost(task, f"every Dask worker that took it died before it finished ({exc}); the workers were "
                                   "lost, not its grade: grade it again")
                    elif isinstance(exc, WorkerRefused):
                        raise ClusterError(str(exc))
                    elif isinstance(exc, (ImportError, AttributeError)):
                        raise ClusterError(_not_ol([f"{task.parcel.name}: {type(exc).__name__}: {exc}"]))
                    else:  # the grader's or the worker's fault on this entry: its own ungraded row, the class goes on
                        lost(task, f"the grader failed on a Dask worker, not the submission ({type(exc).__name__}: "
                                   f"{' '.join(str(exc).split())[:300]})")
                now = time.monotonic()
                if finished:
                    last_finish = now
                if now - checked >= 5 * POLL_S:
                    checked = now
                    workers = client.nthreads()
                    slots = max(1, sum(workers.values()))
                    if workers:
                        last_worker = now
                    elif now - last_worker > WORKERS_S:
                        raise ClusterError(f"every Dask worker of {self.name} is gone, for {WORKERS_S} s: "
                                           f"{len(pending)} submissions left ungraded (rerun to resume)")
                if now - last_finish > STALL_S:
                    raise ClusterError(f"no submission finished on {self.name} in {STALL_S} s: the cluster is stuck "
                                       "(look at its dashboard); rerun to resume")
        finally:
            left = [f for f in futures if not f.done()]
            if left:
                client.cancel(left, force=True)
            with contextlib.suppress(ValueError, KeyError):
                client.unsubscribe_topic(TOPIC)
            with contextlib.suppress(TimeoutError, OSError):
                client.close(timeout=10)


def _not_ol(problems: list[str]) -> str:
    return ("a Dask worker could not run ol's grading task (" + " | ".join(problems) + "): each worker must run "
            "from the client's ol checkout, e.g. `.venv/bin/dask worker ADDRESS` with PYTHONPATH=the checkout "
            "(docs/grading.md)")
