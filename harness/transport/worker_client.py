"""The worker transport: a submission in a confined worker process, every call under a deadline.

The judge starts the worker of the submission's language (harness.languages; ol's own
language's is `-m harness.protocol.worker`) through harness.sandbox.confine, in the best sandbox mode the machine allows
(bubblewrap; else an unprivileged uid; the mode is recorded in every report), with a pipe pair passed
as inherited descriptors (the submission's own stdout and stderr are drained apart and kept up to a
cap). One worker serves a whole check. A call that passes its deadline kills the worker (its whole
sandbox) and is a Timeout; a worker that dies or breaks the protocol is Crashed; either way the next
call starts a fresh worker. Student code can hang, crash or print; it cannot hang the judge.
"""

import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, NoReturn, Protocol

from ..kernel import clock
from ..kernel.errors import Crashed, Raised, Timeout, Words
from ..protocol.session import PROTOCOL_VERSION
from ..protocol.wire import dumps, loads, read_some
from ..sandbox.bwrap import Limits
from ..sandbox.confine import Mode, children, confine, descendants, kill_all, kill_group, own_folder, process_parents, reap
from .error_answer import bounded, with_sources
from .impl import CallInfo, describe_call

OUTPUT_CAP = 16 * 1024  # bytes of the submission's stdout and of its stderr kept for the report
MESSAGE_CAP = 64 * 1024 * 1024  # a protocol line longer than this is a protocol violation
PIPE_CHUNK = 1 << 16  # bytes written at once: a pipe's buffer, so a ready pipe never blocks the judge
STARTUP_S = 30.0  # importing numpy on a loaded machine takes a few seconds; a hello never should take 30
MEMORY_LIMIT = 4 * 1024**3  # address space of each worker process: the tiny llama needs well under 1 GiB
EXIT_WAIT_S = 2.0  # after the protocol output closes: how long the judge waits for the worker to exit
SWEEP_EVERY_S = 0.25  # the worker's child processes are killed this often at most (after a call), and after load
# Hard limits of every process of a worker (harness.sandbox.bwrap.Limits): a whole check uses about 10 s of CPU
# and a few threads; the worker writes no file of its own (its tmpfs is 64 MiB, each file at most 16 MiB).
WORKER_LIMITS = Limits(address_space=MEMORY_LIMIT, cpu_seconds=600, file_size=16 << 20, processes=64, open_files=256)
SIGNAL_CAUSES: dict[int, str] = {  # what a worker's death by a signal most likely means
    signal.SIGKILL: " (out of memory, or a limit of its sandbox?)", signal.SIGSEGV: " (segmentation fault)",
    signal.SIGXCPU: " (its CPU time limit)", signal.SIGXFSZ: " (it wrote a file over its size limit)"}
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OL_SPIN_S")  # what a worker inherits


class _Capped:
    """Drains a pipe in a thread, keeping the first OUTPUT_CAP bytes and counting the rest."""

    def __init__(self, stream) -> None:
        self.kept = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            room = OUTPUT_CAP - len(self.kept)
            self.kept += chunk[:max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        s = self.kept.decode(errors="replace")
        return s + (f"\n... [{self.dropped} more bytes not shown]" if self.dropped else "")


class Launch(Protocol):
    """How a language starts its worker (harness.languages.WorkerLaunch, which this floor does not import)."""

    @property
    def argv(self) -> Callable[[int, int], list[str]]: ...  # (fd_in, fd_out) -> the worker's argv

    @property
    def visible(self) -> tuple[Path, ...]: ...  # read-only paths it may see, besides the interpreter

    @property
    def env(self) -> dict[str, str]: ...


class WorkerTransport:
    """Transport (harness.transport.impl): each call a message to a confined worker process, restarted when it breaks."""

    def __init__(self, launch: Callable[[Path], "Launch"], mode: Mode, language: str = "",
                 source_root: Path | None = None, words: Words = Words()) -> None:
        self.launch = launch  # worker's own folder -> its WorkerLaunch (harness.languages), from the submission's language
        self.mode = mode      # how it is confined (harness.sandbox.confine)
        self.language = language  # the submission's language ("": ol's own): errors are worded in its terms (words)
        self.words = words
        self.source_root = source_root  # the judge's copy of its sources: the line a frame names is read there
        self.proc: subprocess.Popen | None = None
        self.request_id = 0
        self.restarts = 0
        self.last_output = ""
        self._deadline_s = 0.0  # the deadline of the call in progress

    # ---- process lifecycle ----------------------------------------------------------------------
    def spawn(self) -> None:
        """Start the worker now, without waiting for its hello (the first call waits for it). Call it from a
        thread that outlives the worker: bwrap's --die-with-parent follows the thread that started it."""
        if self.proc is None:
            self._spawn()

    def _spawn(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="ol-worker-"))
        try:
            self._launch()
        except BaseException:  # a submission too large to copy, a sandbox that refuses: its folder goes too
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise

    def _launch(self) -> None:
        own_folder(self.workdir, self.mode)  # the confined uid's alone (mode uid: 0710) before its copies land in it
        home = self.workdir / "home"   # the worker's cwd outside bwrap (bwrap gives it a private tmpfs)
        home.mkdir(mode=0o700)
        launch = self.launch(self.workdir)
        env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}  # an allow-list: no secrets pass
        env.update(launch.env)
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        os.set_blocking(self._to_worker, False)  # _send waits with a deadline, never in write()
        os.set_blocking(self._from_worker, False)  # read_some polls briefly, then waits in select
        argv, how = confine(self.mode, launch.argv(to_worker_r, from_worker_w), list(launch.visible), env, home,
                            WORKER_LIMITS)
        how.setdefault("env", {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        self.proc = subprocess.Popen(
            argv, pass_fds=(to_worker_r, from_worker_w), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, **how)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._swept = 0.0  # when its child processes were last killed
        self._buf, self._scanned = bytearray(), 0  # bytes read, not yet a whole line; how far scanned
        self._out, self._err = _Capped(self.proc.stdout), _Capped(self.proc.stderr)
        self._greeted, self._spawned_at = False, clock.now()

    def _greet(self, by: float | None = None) -> None:
        """Read the worker's hello, within STARTUP_S of its start (and before `by`, a `load`'s deadline)."""
        if by is not None and by < self._spawned_at + STARTUP_S:
            hello = self._read(by, "load", lambda: describe_call("load", {}, by - self._spawned_at))
        else:
            hello = self._read(self._spawned_at + STARTUP_S, "startup", f"the worker's start ({STARTUP_S:.0f} s to say hello)")
        if not isinstance(hello.get("hello"), dict):
            self._fail(Crashed(f"the worker did not start: expected a hello, got {str(hello)[:200]}"))
        if hello["hello"].get("protocol") != PROTOCOL_VERSION:
            self._fail(Crashed(f"the worker speaks protocol {hello['hello'].get('protocol')!r}; "
                               f"this judge speaks {PROTOCOL_VERSION} (spec/protocol.md)"))
        self._greeted, self._batches = True, hello["hello"].get("batch") is True

    def _kill(self) -> None:
        if self.proc is None:
            return
        kill_group(self.proc.pid)  # bwrap: its PID namespace dies whole with it
        self.proc.wait()
        reap(self.mode)  # mode uid: the daemons it left (re-parented to this judge, a child subreaper)
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        self._out.thread.join(timeout=1)
        self._err.thread.join(timeout=1)
        self.last_output = self._output()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.proc = None
        self.restarts += 1

    def close(self) -> None:
        self._kill()

    def restart(self) -> None:
        """Drop this worker (the next call starts a fresh one): its protocol state can no longer be trusted."""
        self._kill()

    def _output(self) -> str:
        parts = []
        if self._out.kept or self._out.dropped:
            parts.append("--- your code's stdout ---\n" + self._out.text())
        if self._err.kept or self._err.dropped:
            parts.append("--- your code's stderr ---\n" + self._err.text())
        return "\n".join(parts)

    def _fail(self, error) -> NoReturn:
        """Kill the worker (the next call gets a fresh one) and raise `error` with its output attached."""
        self._kill()
        if self.last_output:
            error.args = (f"{error.args[0]}\n{self.last_output}",)
        raise error

    # ---- messages ---------------------------------------------------------------------------------
    def _read(self, deadline: float, op: str, call="") -> dict:  # call: what a timeout names (a str, or a function making it)
        while (end := self._buf.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buf)  # each byte is scanned once: an oversize line costs linear time
            left = deadline - clock.now()
            if left <= 0:
                self._fail(Timeout(f"{call() if callable(call) else (call or op)}: no answer within the deadline; the worker was stopped"))
            chunk = read_some(self._from_worker, left)
            if chunk is None:
                continue
            if not chunk:
                self._fail(Crashed(f"{op}: the worker process {self._how_it_ended()} before answering"))
            self._buf += chunk
            if len(self._buf) > MESSAGE_CAP:
                self._fail(Crashed(f"{op}: a protocol message exceeded {MESSAGE_CAP} bytes"))
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        self._scanned = 0
        try:
            msg = loads(line)
            if not isinstance(msg, dict):
                raise ValueError("not an object")
            return msg
        except (ValueError, RecursionError) as e:  # RecursionError: an array nested past the parser's depth
            self._fail(Crashed(f"{op}: the worker broke the protocol ({type(e).__name__}: {str(e)[:100]}): {line[:200]!r}"))

    def _how_it_ended(self) -> str:
        """Why the protocol output closed: the worker's exit code or signal (bwrap reports a signal as 128+N)."""
        if self.proc is None:
            return "no worker was running"
        try:
            code = self.proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return "closed the protocol's output without exiting"
        if code > 128 and self.mode.name == "bwrap":
            code = -(code - 128)
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return how + SIGNAL_CAUSES.get(-code, "")

    def _send(self, msg, op: str, deadline: float) -> None:
        """Write one message, never blocking past the deadline: a worker that stops reading (its pipe stays full
        until the deadline) is crashed. A write the pipe has room for is always made, the deadline passed or not:
        a call whose time ran out is then a timeout, read as one by _read, never a reader that stopped."""
        data = memoryview(dumps(msg))
        while data:
            try:  # write first (the pipe is non-blocking, and usually has room); wait only when it is full
                data = data[os.write(self._to_worker, data[:PIPE_CHUNK]):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                self._fail(Crashed(f"{op}: the worker process is gone (its input closed)"))
            left = deadline - clock.now()
            if left <= 0:
                self._fail(Crashed(f"{op}: the worker stopped reading the judge's messages (a reply was left unread "
                                   f"until the call's deadline of {self._deadline_s:.3g} s)"))
            select.select([], [self._to_worker], [], left)

    def run(self, op: str, args: dict, callbacks, deadline_s: float) -> CallInfo:
        start = time.perf_counter()
        self._deadline_s = deadline_s  # the deadline in force, as a crash at it names it
        try:
            if self.proc is None:
                self._spawn()
            if op == "load" and not self._greeted:
                # the worker's first `load` counts from its start: the start is part of the import it waits for, and a
                # submission that never loads gets its verdict within the deadline plus the judge's own start
                deadline = self._spawned_at + deadline_s
                self._greet(deadline)
            else:
                # any other call (and a `load` to a worker that has long since started) counts from now, after
                # the hello: the start is not taken from its deadline (spec/protocol.md section 5)
                if not self._greeted:
                    self._greet()
                deadline = clock.now() + deadline_s
            value = self._exchange(op, args, callbacks, deadline, lambda: describe_call(op, args, deadline_s))
            return CallInfo(op, value=value, duration_s=time.perf_counter() - start)
        except (Raised, Timeout, Crashed) as e:
            return CallInfo(op, error=e, duration_s=time.perf_counter() - start)
        finally:
            self._sweep(force=op == "load")

    def _sweep(self, force: bool) -> None:
        """Kill the worker's own child processes, which no call needs once it has answered: a fork bomb's
        spinning children would otherwise steal the CPU for the rest of the check (and from its neighbours).
        After `load` always; after other calls at most every SWEEP_EVERY_S (a pass over /proc costs ms)."""
        now = time.monotonic()
        if self.proc is None or (not force and now - self._swept < SWEEP_EVERY_S):
            return
        self._swept = now
        worker = self.proc.pid  # uid and none: the process started is the worker
        if self.mode.name == "bwrap":  # the worker is the one child of the bwrap process (its sandbox's init)
            kids = children(worker)
            if kids is None:
                kids = [p for p, parent in process_parents().items() if parent == worker]
            if len(kids) != 1:
                return
            worker = kids[0]
        kill_all(descendants(worker))
        reap(self.mode, known={self.proc.pid})  # uid: the daemons it left, re-parented to this judge

    def run_batch(self, calls: list[tuple[str, dict, float]], callbacks, end: float) -> list[CallInfo]:
        """The calls (op, args, deadline_s) in one message, when the worker takes batches (spec/protocol.md section 3):
        each answered on its own line under its own deadline, counted from the answer before it and cut at `end`, as
        run() answers it alone. The CallInfos of the calls answered, in order: they stop after a timeout or a crash
        (the worker is gone), or before a call `end` leaves no time (the worker, which owes answers, is stopped);
        none when the worker takes no batches."""
        infos: list[CallInfo] = []
        try:
            if self.proc is None:
                self._spawn()
            if not self._greeted:
                self._greet()
            first, began = self.request_id + 1, clock.now()  # began: when the call now awaited began
            for j, (op, args, deadline_s) in enumerate(calls if self._batches else ()):
                start, self._deadline_s = time.perf_counter(), min(deadline_s, end - began)
                if self._deadline_s <= 0:  # the time left went before this call began: it is asked alone, if at all
                    if j:
                        self._kill()  # it owes answers
                    break
                info = CallInfo(op, deadline_s=self._deadline_s)
                infos.append(info)
                if not j:
                    self.request_id += len(calls)
                    self._send({"batch": [{"id": first + i, "op": o, "args": a} for i, (o, a, _) in enumerate(calls)]},
                               op, began + info.deadline_s)
                try:
                    info.value = self._answer(first + j, op, callbacks, began + info.deadline_s,
                                              lambda: describe_call(op, args, info.deadline_s))
                except Raised as e:
                    info.error = e
                info.duration_s, began = time.perf_counter() - start, clock.now()
                self._sweep(force=False)  # as after a call alone: its child processes live no longer
        except (Timeout, Crashed) as e:  # the call whose answer was awaited (a failed start or write: the first's)
            infos = infos or [CallInfo(calls[0][0], deadline_s=calls[0][2])]
            infos[-1].error = e
        return infos

    def _exchange(self, op: str, args: dict, callbacks, deadline: float, call: str | Callable[[], str]):
        self.request_id += 1
        rid = self.request_id  # each request its own id: an extra or stale answer is a protocol error
        self._send({"id": rid, "op": op, "args": args}, op, deadline)
        return self._answer(rid, op, callbacks, deadline, call)

    def _answer(self, rid: int, op: str, callbacks, deadline: float, call: str | Callable[[], str]):
        """The answer to request `rid`, the callbacks before it answered."""
        while True:
            msg = self._read(deadline, op, call)
            if "call" in msg:  # a callback: the judge answers it, then keeps waiting
                try:
                    reply = {"id": msg.get("id"), "ok": callbacks(msg["call"], msg.get("args") or {})}
                except Exception as e:  # noqa: BLE001 -- a refused callback goes back to the submission
                    reply = {"id": msg.get("id"), "error": {"type": type(e).__name__, "message": str(e)}}
                self._send(reply, op, deadline)
                continue
            if type(msg.get("id")) is not int or msg["id"] != rid:
                self._fail(Crashed(f"{op}: the worker answered request id {msg.get('id')!r}; the judge asked {rid}"))
            if "error" in msg:
                return self._raise(op, msg["error"], deadline)
            if "ok" not in msg:
                self._fail(Crashed(f"{op}: the worker's answer has neither 'ok' nor 'error'"))
            return msg["ok"]

    def _raise(self, op: str, data, deadline: float):
        if not isinstance(data, dict):
            self._fail(Crashed(f"{op}: the worker's error is not an object"))
        raise Raised(op, with_sources(bounded(data), self.source_root, deadline), self.language, self.words)


class Unbuilt:
    """The transport of a submission whose build failed: every call fails with the build's error (so
    `load` fails, and `ol check` reports the reason on every test). Nothing runs."""

    def __init__(self, failure, mode: Mode, language: str = "") -> None:
        self.failure, self.mode, self.language = failure, mode, language
        self.restarts, self.last_output = 0, ""

    def spawn(self) -> None:
        pass

    def run(self, op: str, args: dict, callbacks, deadline_s: float) -> CallInfo:
        return CallInfo(op, error=self.failure)

    def restart(self) -> None:
        pass

    def close(self) -> None:
        pass
