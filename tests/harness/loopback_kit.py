"""A real Dask cluster on this machine's loopback: `dask scheduler` and N `dask worker` processes, for the cluster
tests and bench/grade_rate.py (which imports it by its path). Every wait has a deadline (START_S);
every process runs in a session of its own, killed with its children on leaving the `with`. A scheduler left
behind anyway stops after IDLE_S idle, its workers DEATH_S after losing it. Logs go to files in `self.dir`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.kernel.paths import REPO
from harness.sandbox.confine import kill_group

START_S = 90  # the scheduler's file and the workers' registration
IDLE_S = 900  # a scheduler with no client for this long stops (a leftover of a killed caller)
DEATH_S = 60  # a worker that lost its scheduler for this long stops
STOP_S = 15  # after SIGTERM, before SIGKILL


def dask_command() -> list[str]:
    """This environment's `dask` command (the one `pip install distributed` gives)."""
    exe = Path(sys.executable).parent / "dask"
    return [str(exe)] if exe.exists() else [sys.executable, "-P", "-s", "-m", "dask"]


class LoopbackError(RuntimeError):
    pass


class Loopback:
    def __init__(self, workers: int = 2, nthreads: int = 1, env: dict | None = None, nanny: bool = True,
                 worker_pythonpath: Path | str = REPO) -> None:  # a folder, or folders joined by os.pathsep
        self.n, self.nthreads, self.nanny, self.worker_pythonpath = workers, nthreads, nanny, worker_pythonpath
        self.env = {**os.environ, **(env or {}), "DASK_DISTRIBUTED__SCHEDULER__IDLE_TIMEOUT": f"{IDLE_S}s"}
        self.dir = Path(tempfile.mkdtemp(prefix="ol-loopback-"))
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address = ""

    @property
    def scheduler_file(self) -> Path:
        return self.dir / "scheduler.json"

    def _start(self, argv: list[str], log: str, pythonpath: Path | str) -> subprocess.Popen:
        env = {**self.env, "PYTHONPATH": str(pythonpath)}
        with open(self.dir / log, "wb") as f:
            return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=self.dir, start_new_session=True)

    def __enter__(self) -> Loopback:
        try:
            self.scheduler = self._start([*dask_command(), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                          "--no-dashboard", "--scheduler-file", str(self.scheduler_file)],
                                         "scheduler.log", REPO)
            deadline = time.monotonic() + START_S
            while not self._read_address():
                if self.scheduler.poll() is not None or time.monotonic() > deadline:
                    raise LoopbackError(f"dask scheduler did not start within {START_S} s: {self.log('scheduler.log')[-2000:]}")
                time.sleep(0.2)
            for _ in range(self.n):
                self.add_worker()
            self.wait_for_workers(self.n)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _read_address(self) -> bool:
        try:
            self.address = json.loads(self.scheduler_file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            return False
        return True

    def add_worker(self, pythonpath: Path | str | None = None, name: str | None = None) -> subprocess.Popen:
        i = len(self.workers)
        name = name or f"w{i}"
        argv = [*dask_command(), "worker", self.address, "--nthreads", str(self.nthreads), "--nworkers", "1",
                "--name", name, "--no-dashboard", "--death-timeout", str(DEATH_S),
                "--local-directory", str(self.dir / f"{name}-space"), "--nanny" if self.nanny else "--no-nanny"]
        p = self._start(argv, f"{name}.log", pythonpath or self.worker_pythonpath)
        self.workers.append(p)
        return p

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client  # here: Dask is a second of imports; a loopback's own processes need it, this one only here

        with Client(self.address, timeout=START_S, set_as_default=False) as c:
            try:
                c.wait_for_workers(n, timeout=START_S)
            except TimeoutError:
                raise LoopbackError(f"{n} dask workers did not join within {START_S} s: " +
                                    " | ".join(self.log(f"w{i}.log")[-500:] for i in range(len(self.workers)))) from None

    def kill_worker(self, i: int) -> None:
        """SIGKILL the i-th worker's whole session (its nanny and worker process): the machine is gone."""
        kill_group(self.workers[i].pid)
        self.workers[i].wait(timeout=STOP_S)

    def log(self, name: str) -> str:
        try:
            return (self.dir / name).read_text(errors="replace")
        except OSError:
            return ""

    def __exit__(self, *exc) -> None:
        procs = [p for p in [*self.workers, self.scheduler] if p is not None]
        for p in procs:
            kill_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_S
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in procs:
            kill_group(p.pid)  # whatever is left of each session
            try:
                p.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
