"""Judges forked from a process that has already imported them.

`ol grade` runs each submission's judge (`ol check ... --json -`) in a process of its own. A new interpreter
spends about 0.5 s of CPU importing the harness, pytest, numpy and the chapter's judge modules before it judges
anything; a zygote imports them once, and each judge is a fork of it, in the session and with the environment,
folder and output pipes the grading run gives it, so it runs as the new interpreter would (nothing it changes
reaches the zygote or the next judge).

What it saves (issue 40: a server stays only with a measured saving of a second or more, in the user's layout):
the imports each judge would make, per submission. A fresh interpreter of ol's importing JUDGE_PRELOAD as a judge starts (`-P -s -c "import
harness.check.runner, harness.cli, harness.check.pytest_plugin"`, PYTHONPATH ol's folder) took 1.7 to
2.9 s, five runs, against 0.1 to 0.2 s for `-c pass` (2026-12-07, this project's 2-core machine, shared and loaded):
a class of 600 graded with `ol grade --jobs 2` waits at least 600 x 0.5 s / 2 = 150 s less (a quiet machine's
0.5 s), more on a loaded one.

    -P -s -m harness.grading.zygote SOCKET CHAPTER [MODULE...]    (started by Zygote; not a command for people)

Isolated (harness.kernel.paths.isolated_argv): sys.path holds ol's folder and no current folder, so a judge's lazy
import never finds a submission's module of that name. The caller (harness.grading.judge) says what to import
before forking (`preload`) and what each fork runs (`main`, "module:function", called as a click command).

It answers on a Unix socket in a folder only its user can enter (a worker, under another uid or in a sandbox,
cannot reach it), never an abstract one; a path too long for an AF_UNIX address is reached through a descriptor
of its folder (`short`). A request is one JSON object {argv, env, cwd, main} and three descriptors: the judge's
stdout, stderr and a status pipe. For each, the zygote forks a monitor, which forks the judge and writes "pid N"
as it starts and "exit C" or "signal S" when it ends: the exit status a subprocess would give. One Zygote
serves every thread of its run at once (`--jobs`, a Dask worker's threads): a connection and pipes per request.

Warm (`warm`, the run's golden file and seed): before it listens, the zygote checks the reference on the run's
cases, so that every judge starts with the reference's answers to the seed's property inputs.

Lifetime: the zygote exits at the end of its stdin, a pipe from the process that started it (however that one
died; unlike a parent-death signal, this holds when the thread that started it ends and the process goes on);
each monitor dies with the zygote and each judge with its monitor (PR_SET_PDEATHSIG), so no judge outlives its run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..kernel import clock
from ..kernel.errors import OlError
from ..kernel.paths import isolated_argv
from ..sandbox.confine import kill_group
from ..registry import load_chapter, make_importable, parsed_tests

READY_S = 120  # the zygote's imports and its warm-up check, on a loaded machine (about 3 s on a quiet one)
REQUEST_CAP = 1 << 20  # bytes of one request (an argv and an environment)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ZygoteError(OlError):
    """The zygote could not start, or is gone: no judge can be forked from it (exit 3; the ledger keeps what
    was graded, and a rerun resumes)."""


# ---- the zygote process -------------------------------------------------------------------------------

@contextlib.contextmanager
def short(path: Path) -> Iterator[str]:
    """A path to `path` an AF_UNIX address can hold (108 bytes): itself, or through a descriptor of its folder
    (/proc/self/fd/N/NAME), open while the block runs."""
    if len(os.fsencode(str(path))) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _die_with_parent() -> None:
    """This process is killed when its parent ends (Linux); and at once if that already happened."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def preload(chapter: str, modules: Sequence[str] = ()) -> None:
    """Import `modules` (harness.grading.judge.JUDGE_PRELOAD) and what the chapter's test files import at their top;
    the test files themselves are pytest's to import (it rewrites their asserts)."""
    for name in modules:
        importlib.import_module(name)
    make_importable()
    for f in load_chapter(chapter).tests_files:
        for name in parsed_tests(f).imports:  # the parse load_chapter made (registry.PARSE_LOCK), not another
            importlib.import_module(name)


def _judge(request: dict, fds: list[int]) -> None:
    """In the forked judge: its session, pipes, folder and environment, then `ol` with its argv."""
    out, err, _status = fds
    os.setsid()  # its own session: the caller kills it and everything it started as one group
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _die_with_parent()
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, to in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, to)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # gettempdir() reads the judge's own TMPDIR
    sys.argv = ["ol", *request["argv"]]
    code = 3
    try:
        module, _, function = request["main"].partition(":")
        getattr(importlib.import_module(module), function)(args=request["argv"], prog_name="ol")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        atexit._run_exitfuncs()  # what a new interpreter would run at its exit (a --fresh check's cases removed)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _monitor(request: dict, fds: list[int]) -> None:
    """In the forked monitor: fork the judge, say its pid, wait for it, say how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _die_with_parent()
    pid = os.fork()
    if pid == 0:
        _judge(request, fds)
    status = fds[2]
    os.close(fds[0])
    os.close(fds[1])
    os.write(status, f"pid {pid}\n".encode())
    _, how = os.waitpid(pid, 0)
    end = f"signal {os.WTERMSIG(how)}" if os.WIFSIGNALED(how) else f"exit {os.WEXITSTATUS(how)}"
    os.write(status, f"{end}\n".encode())
    os._exit(0)


WARM_ENV = "OL_ZYGOTE_WARM"  # [golden file, seed or null]: the run's cases, which warm() checks the reference on


def warm(chapter: str, golden: str, seed: int | None) -> None:
    """Check the reference on the run's cases, in this process, before any fork: its answers to the property inputs
    of the run's seed (harness.pack.differential keeps them by domain, reference and seed; the judge's reference is
    one object a process) are then every judge's without asking the reference again. The check leaves no thread
    behind (a fork copies only the thread that forks). A failure costs only the time: each judge asks the
    reference itself, as without it, and the zygote's log says why.

    What it saves (issue 40: a mechanism stays only with a measured saving of a second or more, in the user's
    layout): the reference's answers each judge of a class would compute again. `bench/grade_rate.py` (a class of
    20 in ol's own language, fresh cases, --jobs 2, no cluster), with and without, interleaved (2026-12-08, this
    project's 2-core machine, quiet): a judge's median 3.17 and 3.88 s with it, 4.14 and 4.25 s without; the run
    36.7 and 44.4 s against 44.1 and 44.6 s. About 0.7 s a submission: a class of 600 at --jobs 2, some 200 s."""
    from ..check.runner import CheckOptions, run_check  # here: only the zygote checks (pytest, 0.36 s to import)

    try:
        run_check(load_chapter(chapter), "reference", CheckOptions(golden=golden, fresh_seed=seed))
    except Exception as e:  # noqa: BLE001 -- the judges ask the reference themselves
        sys.stderr.write(f"zygote: the warm-up check failed ({type(e).__name__}: {e}); each judge asks the reference\n")


def serve(path: str, chapter: str, modules: Sequence[str] = ()) -> None:
    """The zygote's loop: preload (and warm, when WARM_ENV names the run's cases), listen, fork a monitor per
    request; end with its stdin."""
    preload(chapter, modules)
    if WARM_ENV in os.environ:
        warm(chapter, *json.loads(os.environ.pop(WARM_ENV)))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel: the zygote waits for none
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with short(Path(path)) as address:  # a path of any length (a Dask worker's folder deep in a scratch tree)
        listener.bind(address)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj != listener:  # stdin: readable only at its end (its writer never writes)
                os._exit(0)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                try:
                    data, fds, _, _ = socket.recv_fds(conn, REQUEST_CAP, 3)
                    request = json.loads(data)
                except (OSError, ValueError):
                    continue
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    continue
                if os.fork() == 0:
                    listener.close()
                    _monitor(request, fds)
                for fd in fds:
                    os.close(fd)


# ---- the caller's side --------------------------------------------------------------------------------

class Zygote:
    """A zygote for one grading run's judges: `env` the environment it imports under, `home` a folder of the run's
    scratch, `preload` what it imports, `main` what a fork runs unless the request names its own."""

    def __init__(self, chapter: str, env: dict, home: Path, preload: tuple[str, ...] = (), main: str | None = None,
                 warm: tuple[Path, int | None] | None = None) -> None:
        self.main = main
        if warm is not None:  # the run's cases (golden file, seed): the zygote checks the reference on them first
            env = {**env, WARM_ENV: json.dumps([str(warm[0]), warm[1]])}
        home = Path(home)
        home.mkdir(mode=0o700, exist_ok=True)
        home.chmod(0o700)  # only this user reaches the socket: no submission's worker can ask for a judge
        self.path = str(home / "zygote.sock")
        log = home / "zygote.log"  # its own errors (a judge's go to that judge's stderr)
        with log.open("wb") as errors:
            self.proc = subprocess.Popen(isolated_argv("harness.grading.zygote", self.path, chapter, *preload),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env,
                                         cwd="/", start_new_session=True)
        assert self.proc.stdout is not None  # stdout=PIPE
        ready = _read_line(self.proc.stdout.fileno(), clock.now() + READY_S)
        if ready != "ready":
            self.close()
            why = log.read_text(errors="replace").strip().splitlines()[-1:]
            raise ZygoteError("the judges' zygote did not start (" + (why[0] if why else f"no word in {READY_S} s") + ")")

    def run(self, argv: list[str], env: dict, cwd: Path, timeout: float, main: str | None = None) -> subprocess.CompletedProcess:
        """A judge forked with `argv` (to `ol`), `env` (its whole environment) and `cwd`, as subprocess.run with
        capture_output and text would run it; past `timeout` seconds its session is killed (TimeoutExpired)."""
        main = main or self.main
        if main is None:
            raise ZygoteError("a judge needs a main to run: give the Zygote one, or the request")
        request = {"argv": argv, "env": env, "cwd": str(cwd), "main": main}
        pipes = [os.pipe() for _ in range(3)]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s, short(Path(self.path)) as address:
                s.settimeout(10)
                s.connect(address)
                socket.send_fds(s, [json.dumps(request).encode()], [w for _, w in pipes])
        except OSError as e:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise ZygoteError(f"the judges' zygote is gone ({e}): no judge can start") from None
        for _, w in pipes:
            os.close(w)
        return _collect([r for r, _ in pipes], argv, timeout)

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()  # its end of input: it exits, and its judges with it
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        Path(self.path).unlink(missing_ok=True)


def _read_line(fd: int, deadline: float) -> str | None:
    """The first line from `fd` before the deadline, or None (its end, or the deadline, first)."""
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not buf.endswith(b"\n"):
            left = deadline - clock.now()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            buf += chunk
    return buf.decode(errors="replace").strip()


def _collect(fds: list[int], argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Read the judge's stdout, stderr and status to their ends; kill its session `timeout` seconds from now (the
    judge's clock, harness.kernel.clock: a Ctrl-Z of `ol grade` is no judge's time)."""
    deadline = clock.now() + timeout
    data = {fd: bytearray() for fd in fds}
    killed = False
    with selectors.DefaultSelector() as sel:
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():  # a descriptor is unregistered at its end
            left = deadline - clock.now()
            if left <= 0 and not killed:
                first = bytes(data[fds[2]]).split(b"\n", 1)[0].decode(errors="replace")
                if first.startswith("pid "):  # the monitor's first line: the judge, whose session is killed
                    kill_group(int(first.split()[1]))
                killed, deadline = True, clock.now() + 10  # what is left of its output, after the kill
                continue
            if left <= 0:
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    data[key.fd] += chunk
                else:
                    sel.unregister(key.fd)
    for fd in fds:
        os.close(fd)
    out, err, status = (bytes(data[fd]).decode(errors="replace") for fd in fds)
    if killed:
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
    how, _, number = (status.strip().splitlines() or [""])[-1].partition(" ")  # the monitor's last line
    if how not in ("exit", "signal"):
        raise ZygoteError("a judge's monitor ended without saying how the judge ended (the zygote was killed?)")
    return subprocess.CompletedProcess(argv, int(number) if how == "exit" else -int(number), out, err)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], sys.argv[3:])
